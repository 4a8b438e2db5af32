"""The replay memory: a ring of n-step transitions (`replay.nstep.Transitions`),
sampled uniformly. `discount` is `gamma**k`, and 0 only after a real termination.
(Stacked image observations have their own memory, which stores each frame once:
`replay.frame_memory`; prioritized sampling wraps either: `replay.prioritized`.)
Dict and Tuple observations are stored one ring per leaf, `obs` and `next_obs`
whole: an image leaf is held twice per transition, not frame by frame."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil

from pararl.errors import UsageError
from pararl.observations import Leaf, put, row_bytes, take, zeros
from pararl.replay.frame_steps import FrameSteps
from pararl.replay.nstep import Transitions


@dataclass(frozen=True)
class Added:
    """What an `add` changed, for a priority index over the slots: the slots whose
    transitions were overwritten, the slots of the new ones, and the priorities
    their actor gave them (None: none given)."""

    cleared: np.ndarray
    slots: np.ndarray
    priority: np.ndarray | None


def check_fits(capacity: int, slot_bytes: int, agents: int = 1) -> None:
    """A one-line UsageError when `capacity` slots of `slot_bytes` (`agents` memories
    of them: a population's, `--seeds`) cannot fit in the memory available now (said
    at start, not hours later when the rings fill)."""
    needed = agents * capacity * slot_bytes
    available = psutil.virtual_memory().available
    if needed <= available:
        return
    have = f"but {available:,} bytes ({available / 2**30:.1f} GiB) are available"
    if agents == 1:
        raise UsageError(
            f"--buffer-size {capacity:,} needs {needed:,} bytes of replay memory "
            f"({needed / 2**30:.1f} GiB), {have}; lower --buffer-size"
        )
    each = capacity * slot_bytes
    raise UsageError(
        f"--seeds {agents} x --buffer-size {capacity:,} need {needed:,} bytes of replay "
        f"memory ({agents} memories of {each / 2**30:.2f} GiB: {needed / 2**30:.1f} GiB), "
        f"{have}; lower --buffer-size or --seeds"
    )


def leaves_of(obs: Any) -> list[np.ndarray]:
    """The arrays of a ring of observations: itself, or its leaves'."""
    return list(obs.values()) if isinstance(obs, dict) else [obs]


class ReplayBuffer:
    """A ring buffer of transitions in numpy, sampled uniformly. Actions are indices
    by default (DQN), or rows of `action_shape` (SAC's float32 vectors); `mask_size`
    > 0: each transition's `next_mask` too (`envs.masks`). Given `leaves` (Dict and
    Tuple observations), `obs` and `next_obs` are dicts of rings, one per leaf."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        obs_dtype: npt.DTypeLike = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: npt.DTypeLike = np.int64,
        mask_size: int = 0,
        leaves: Sequence[Leaf] = (),
    ) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        slot = self.slot_bytes(obs_shape, obs_dtype, action_shape, action_dtype, mask_size, leaves)
        check_fits(capacity, slot)
        self.obs: Any
        self.next_obs: Any
        if leaves:
            self.obs, self.next_obs = zeros(leaves, (capacity,)), zeros(leaves, (capacity,))
        else:
            self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
            self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.action = np.zeros((capacity, *action_shape), dtype=action_dtype)
        self.ret = np.zeros(capacity, dtype=np.float32)
        self.discount = np.zeros(capacity, dtype=np.float32)
        self.next_mask = np.ones((capacity, mask_size), bool) if mask_size else None
        self.pos = 0  # next write index
        self.size = 0
        self.added = 0  # transitions ever added

    @staticmethod
    def slot_bytes(
        obs_shape: tuple[int, ...],
        obs_dtype: npt.DTypeLike = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: npt.DTypeLike = np.int64,
        mask_size: int = 0,
        leaves: Sequence[Leaf] = (),
    ) -> int:
        """Bytes per slot: both observations, the action, return, discount and mask."""
        obs_bytes = int(np.prod(obs_shape)) * np.dtype(obs_dtype).itemsize
        if leaves:
            obs_bytes = row_bytes(leaves)
        action_bytes = int(np.prod(action_shape)) * np.dtype(action_dtype).itemsize
        return 2 * obs_bytes + action_bytes + 4 + 4 + mask_size

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for name in self._arrays() for a in leaves_of(getattr(self, name)))

    def add(self, batch: Transitions | FrameSteps) -> Added:
        if not isinstance(batch, Transitions):
            raise TypeError("a ReplayBuffer stores Transitions, not frame chunks")
        n = len(batch)
        if n > self.capacity:  # only the newest fit
            batch = batch.rows(slice(-self.capacity, None))
            n = self.capacity
        idx = (self.pos + np.arange(n)) % self.capacity
        put(self.obs, idx, batch.obs)
        put(self.next_obs, idx, batch.next_obs)
        self.action[idx], self.ret[idx], self.discount[idx] = (
            batch.action,
            batch.ret,
            batch.discount,
        )
        if self.next_mask is not None:
            if batch.next_mask is None:
                raise ValueError("this memory stores action masks: the transitions have none")
            self.next_mask[idx] = batch.next_mask
        self.pos = (self.pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        self.added += n
        return Added(idx[:0], idx, batch.priority)

    def valid(self, slots: np.ndarray) -> np.ndarray:
        return np.asarray(slots) < self.size

    def gather(self, idx: np.ndarray) -> Transitions:
        next_mask = None if self.next_mask is None else self.next_mask[idx]
        return Transitions(
            take(self.obs, idx),
            self.action[idx],
            self.ret[idx],
            take(self.next_obs, idx),
            self.discount[idx],
            next_mask=next_mask,
        )

    def sample_slots(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        return rng.integers(0, self.size, size=batch_size)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Transitions:
        return self.gather(self.sample_slots(batch_size, rng))

    def _arrays(self) -> tuple[str, ...]:
        masks = () if self.next_mask is None else ("next_mask",)
        return ("obs", "next_obs", "action", "ret", "discount", *masks)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            name: take(getattr(self, name), slice(0, self.size)) for name in self._arrays()
        }
        return {**state, "pos": self.pos, "added": self.added}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        size = len(state["action"])
        if size > self.capacity:
            raise ValueError(f"saved replay holds {size} transitions, capacity is {self.capacity}")
        for name in self._arrays():
            put(getattr(self, name), slice(0, size), state[name])
        self.size, self.pos = size, int(state["pos"]) % self.capacity
        self.added = int(state["added"])
