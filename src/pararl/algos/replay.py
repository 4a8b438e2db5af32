"""The replay memory: a ring of n-step transitions (`samplers.nstep.Transitions`),
sampled uniformly. `discount` is `gamma**k`, and 0 only after a real termination."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import numpy.typing as npt

from pararl.samplers.nstep import Transitions


class ReplayBuffer:
    """A ring buffer of transitions in numpy, sampled uniformly."""

    def __init__(
        self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: npt.DTypeLike = np.float32
    ) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.action = np.zeros(capacity, dtype=np.int64)
        self.ret = np.zeros(capacity, dtype=np.float32)
        self.discount = np.zeros(capacity, dtype=np.float32)
        self.pos = 0  # next write index
        self.size = 0
        self.added = 0  # transitions ever added

    def __len__(self) -> int:
        return self.size

    def add(self, batch: Transitions) -> None:
        n = len(batch)
        if n == 0:
            return
        if n > self.capacity:  # only the newest fit
            batch = Transitions(
                *(getattr(batch, f.name)[-self.capacity :] for f in fields(Transitions))
            )
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        self.obs[idx], self.next_obs[idx] = batch.obs, batch.next_obs
        self.action[idx], self.ret[idx], self.discount[idx] = (
            batch.action,
            batch.ret,
            batch.discount,
        )
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.added += n

    def sample(self, batch_size: int, rng: np.random.Generator) -> Transitions:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = rng.integers(0, self.size, size=batch_size)
        return Transitions(
            self.obs[idx], self.action[idx], self.ret[idx], self.next_obs[idx], self.discount[idx]
        )

    def state_dict(self) -> dict[str, np.ndarray | int]:
        return {
            "obs": self.obs[: self.size],
            "next_obs": self.next_obs[: self.size],
            "action": self.action[: self.size],
            "ret": self.ret[: self.size],
            "discount": self.discount[: self.size],
            "pos": self.pos,
            "added": self.added,
        }

    def load_state_dict(self, state: dict[str, np.ndarray | int]) -> None:
        size = len(state["action"])  # type: ignore[arg-type]
        if size > self.capacity:
            raise ValueError(f"saved replay holds {size} transitions, capacity is {self.capacity}")
        for name in ("obs", "next_obs", "action", "ret", "discount"):
            getattr(self, name)[:size] = state[name]
        self.size, self.pos = size, int(state["pos"]) % self.capacity
        self.added = int(state["added"])
