"""A sum tree in numpy layers: proportional sampling in O(log N) for a whole batch.

Layer 0 is the root, the last layer holds the leaves (one per replay slot, padded
to a power of two). Every node is the sum of its two children. Updates recompute
the touched parents level by level from their children (never by adding deltas,
so sums do not drift); sampling descends all of a batch's draws at once, one
level per step (Schaul et al. 2016, "Prioritized Experience Replay", Appendix B.2.1).
"""

from __future__ import annotations

import numpy as np


class SumTree:
    """Non-negative priorities of `capacity` leaves, sampled in proportion to them."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"sum tree capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        depth = max(0, int(np.ceil(np.log2(capacity))))
        self.layers = [np.zeros(2**level, dtype=np.float64) for level in range(depth + 1)]

    @property
    def leaves(self) -> np.ndarray:
        return self.layers[-1]

    @property
    def total(self) -> float:
        return float(self.layers[0][0])

    def get(self, index: np.ndarray) -> np.ndarray:
        return self.leaves[index]

    def set(self, index: np.ndarray, priority: np.ndarray | float) -> None:
        """Leaves `index` take `priority` (a repeated index keeps its last value)."""
        index = np.asarray(index, dtype=np.int64)
        if index.size == 0:
            return
        priority = np.broadcast_to(np.asarray(priority, dtype=np.float64), index.shape)
        if (priority < 0).any() or not np.isfinite(priority).all():
            raise ValueError("priorities must be finite and >= 0")
        self.leaves[index] = priority
        nodes = np.unique(index)
        for level in range(len(self.layers) - 2, -1, -1):
            nodes = np.unique(nodes // 2)
            child = self.layers[level + 1]
            self.layers[level][nodes] = child[2 * nodes] + child[2 * nodes + 1]

    def find(self, mass: np.ndarray) -> np.ndarray:
        """The leaf where each cumulative `mass` (in [0, total)) falls; a descent never
        enters a subtree whose sum is 0, so a leaf of priority 0 is never returned
        while the total is positive."""
        mass = np.array(mass, dtype=np.float64)
        node = np.zeros(mass.shape, dtype=np.int64)
        for child in self.layers[1:]:
            left = child[2 * node]
            right = child[2 * node + 1]
            go_right = ((mass >= left) & (right > 0)) | (left <= 0)
            mass -= np.where(go_right, left, 0.0)
            node = 2 * node + go_right
        return node

    def sample(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` leaves drawn in proportion to their priorities, stratified: draw k
        falls in the k-th of `count` equal slices of the total (each leaf's expected
        count is still `count * p_i / total`)."""
        total = self.total
        if total <= 0:
            raise ValueError("cannot sample from a sum tree whose priorities are all 0")
        mass = (np.arange(count) + rng.random(count)) * (total / count)
        return self.find(np.minimum(mass, np.nextafter(total, 0.0)))


__all__ = ["SumTree"]
