"""Proportional prioritized replay over either replay memory (Schaul et al. 2016).

Each transition i has priority p_i = (|delta_i| + eps)^alpha, kept in a sum tree
(`replay.sumtree`) indexed by the memory's slots; a batch draws i with probability
P(i) = p_i / sum_k p_k and weighs its loss by w_i = (N * P(i))^-beta / max_j w_j
(the max over the batch, as in the paper's Algorithm 1), beta annealed to 1 over
the run. New transitions get the priority their actor computed (Ape-X, Horgan et
al. 2018) or, without one, the largest seen so far, so each is drawn at least
once soon; a learned batch's priorities become its new |TD errors|.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pararl.replay.frame_memory import FrameReplay
from pararl.replay.nstep import Transitions
from pararl.replay.sumtree import SumTree
from pararl.replay.uniform import ReplayBuffer

PRIORITY_EPS = 1e-6  # keeps every stored transition drawable
REDRAWS = 8


@dataclass
class Sample:
    """A prioritized batch: the transitions, their slots and importance weights."""

    batch: Transitions
    slots: np.ndarray
    weights: np.ndarray


def importance_weights(probs: np.ndarray, count: int, beta: float) -> np.ndarray:
    """w_i = (N * P(i))^-beta, divided by the batch's largest."""
    w = (count * probs) ** -beta
    return (w / w.max()).astype(np.float32)


class PrioritizedReplay:
    """A replay memory sampled in proportion to priorities; `add`, `len`, `sample`
    (uniform) and the checkpoint methods are the memory's."""

    def __init__(self, memory: ReplayBuffer | FrameReplay, alpha: float) -> None:
        self.memory, self.alpha = memory, alpha
        self.capacity = memory.capacity
        self.tree = SumTree(memory.capacity)
        self.max_priority = 1.0

    def __len__(self) -> int:
        return len(self.memory)

    @property
    def added(self) -> int:
        return self.memory.added

    @property
    def nbytes(self) -> int:
        return self.memory.nbytes + sum(layer.nbytes for layer in self.tree.layers)

    def priority(self, td_abs: np.ndarray) -> np.ndarray:
        return (np.abs(td_abs) + PRIORITY_EPS) ** self.alpha

    def add(self, batch: Any) -> None:
        added = self.memory.add(batch)
        self.tree.set(added.cleared, 0.0)
        if added.priority is None:
            initial = np.full(len(added.slots), self.max_priority)
        else:
            initial = self.priority(added.priority.astype(np.float64))
            self.max_priority = max(self.max_priority, float(initial.max(initial=0.0)))
        self.tree.set(added.slots, initial)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Transitions:
        return self.memory.sample(batch_size, rng)

    def sample_prioritized(self, batch_size: int, rng: np.random.Generator, beta: float) -> Sample:
        """A batch drawn in proportion to priority, with importance weights. A pick
        the memory no longer holds whole (its history overwritten) gets priority 0
        and is drawn again."""
        slots = self.tree.sample(batch_size, rng)
        for _ in range(REDRAWS):
            bad = ~self.memory.valid(slots)
            if not bad.any():
                break
            self.tree.set(slots[bad], 0.0)
            slots[bad] = self.tree.sample(int(bad.sum()), rng)
        else:
            if not self.memory.valid(slots).all():
                raise ValueError("prioritized replay: no valid transition left to draw")
        probs = self.tree.get(slots) / self.tree.total
        weights = importance_weights(probs, len(self.memory), beta)
        return Sample(self.memory.gather(slots), slots, weights)

    def update_priorities(self, slots: np.ndarray, td_errors: np.ndarray) -> None:
        """The learned batch's new priorities, from its TD errors."""
        p = self.priority(td_errors.astype(np.float64))
        self.max_priority = max(self.max_priority, float(p.max(initial=0.0)))
        self.tree.set(slots, p)

    def state_dict(self) -> dict[str, Any]:
        return {
            "memory": self.memory.state_dict(),
            "priorities": self.tree.leaves[: self.capacity].copy(),
            "max_priority": self.max_priority,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.memory.load_state_dict(state["memory"])
        self.tree.set(np.arange(self.capacity), state["priorities"])
        self.max_priority = float(state["max_priority"])


__all__ = ["PRIORITY_EPS", "PrioritizedReplay", "Sample", "importance_weights"]
