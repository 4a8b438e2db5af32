"""The replay memory for stacked image observations: each frame stored once.

A naive replay of Atari's 4x84x84 `uint8` stacks stores every frame eight times
(four in `obs`, four in `next_obs`): 56 KB per transition. Here one ring holds
each frame once (7 KB at 84x84), with, per frame, the absolute index of the frame
before it in its episode (`prev`; an episode's first frame points to itself, which
repeats it as `FrameStackObservation`'s reset padding does) and, where an n-step
transition starts at that observation, the absolute index of its next observation,
its action, return and discount. A stack is rebuilt by following `prev` S-1 times,
all of a batch at once (one gather per link, then one gather of the frames), so it
never reaches across an episode start; and a transition is sampled only while the
oldest frame of its stack is still in the ring (its next observation's stack is
newer), so a wrap of the ring never mixes old frames into new stacks.

Why one ring with links, not one ring per env: frames of many envs arrive
interleaved (actors' chunks, in any order), the number of envs changes with
`--workers`, a restarted actor or a resumed run, and one ring keeps the capacity
exact and uniform sampling uniform over transitions, whatever each env's rate.
The chunk format is `replay.frame_steps.FrameSteps`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pararl.replay.frame_steps import FrameSteps
from pararl.replay.nstep import Transitions
from pararl.replay.uniform import Added, check_fits

REDRAWS = 8  # rounds of redrawing invalid picks before sampling from the valid set


class FrameReplay:
    """Transitions between stacked `uint8` observations of shape `(S, *frame)`,
    sampled uniformly; the same interface as `replay.uniform.ReplayBuffer`."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...]) -> None:
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity, self.stack, frame = capacity, obs_shape[0], obs_shape[1:]
        check_fits(capacity, self.slot_bytes(obs_shape))
        self.frames = np.zeros((capacity, *frame), dtype=np.uint8)
        self.prev = np.full(capacity, -1, dtype=np.int64)  # absolute index, -1: unknown
        self.next = np.zeros(capacity, dtype=np.int64)  # absolute index of next obs
        self.has = np.zeros(capacity, dtype=np.bool_)  # a transition starts here
        self.action = np.zeros(capacity, dtype=np.int32)
        self.ret = np.zeros(capacity, dtype=np.float32)
        self.discount = np.zeros(capacity, dtype=np.float32)
        self.written = 0  # frames ever written: frame k lives in slot k % capacity
        self.count = 0  # transitions held
        self.added = 0  # transitions ever added
        self._last = np.full(0, -1, dtype=np.int64)  # per stream: its newest frame

    @staticmethod
    def slot_bytes(obs_shape: tuple[int, ...]) -> int:
        """Bytes per slot: one frame plus its links and transition fields."""
        return int(np.prod(obs_shape[1:])) + 8 + 8 + 1 + 4 + 4 + 4

    @property
    def nbytes(self) -> int:
        arrays = (self.frames, self.prev, self.next, self.has, self.action, self.ret)
        return sum(a.nbytes for a in arrays) + self.discount.nbytes

    def __len__(self) -> int:
        return self.count

    @property
    def size(self) -> int:
        """Frames held."""
        return min(self.written, self.capacity)

    def _alive(self, index: np.ndarray) -> np.ndarray:
        return index >= max(0, self.written - self.capacity)

    def _back(self, index: np.ndarray, hops: np.ndarray) -> np.ndarray:
        """The frame `hops` links before each of `index` (-1 where the way is gone)."""
        out = index.copy()
        for k in range(int(hops.max(initial=0))):
            move = (hops > k) & (out >= 0)
            out[move] = np.where(self._alive(out[move]), self.prev[out[move] % self.capacity], -1)
        return np.where(self._alive(out), out, -1)

    def add(self, batch: Transitions | FrameSteps) -> Added:
        """Store a chunk's frames and transitions; returns the slots whose
        transitions were overwritten and the slots of the new ones."""
        if not isinstance(batch, FrameSteps):
            raise TypeError("a FrameReplay stores frame chunks (replay.frame_steps.FrameSteps)")
        cap, base, f = self.capacity, self.written, batch.num_frames
        absolute = base + np.arange(f)
        slots = absolute % cap
        cleared = np.unique(slots[self.has[slots]])
        self.count -= len(cleared)
        self.has[slots] = False
        self.frames[slots] = batch.frames
        top = int(batch.stream.max(initial=-1)) + 1
        if top > len(self._last):
            self._last = np.concatenate([self._last, np.full(top - len(self._last), -1)])
        prev = np.where(batch.prev >= 0, base + batch.prev, self._last[batch.stream])
        self.prev[slots] = prev
        np.maximum.at(self._last, batch.stream, absolute)
        self.written += f
        # transitions: their observation is `steps` links before their next one
        next_abs = base + batch.next
        obs_abs = self._back(next_abs, batch.steps)
        keep = obs_abs >= 0
        at = obs_abs[keep] % cap
        fresh = ~self.has[at]
        self.has[at] = True
        self.next[at] = next_abs[keep]
        self.action[at] = batch.action[keep]
        self.ret[at] = batch.ret[keep]
        self.discount[at] = batch.discount[keep]
        self.count += int(fresh.sum())
        self.added += len(batch)
        priority = None if batch.priority is None else batch.priority[keep]
        return Added(cleared, at, priority)

    def _absolute(self, slots: np.ndarray) -> np.ndarray:
        """The absolute index of the frame each slot holds now."""
        return slots + self.capacity * ((self.written - 1 - slots) // self.capacity)

    def _stacks(self, newest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[B, S] absolute frame indices of the stacks ending at `newest`, oldest
        first, and whether every one of them is still held."""
        chain = np.empty((len(newest), self.stack), dtype=np.int64)
        chain[:, -1] = newest
        ok = self._alive(newest)
        for k in range(self.stack - 2, -1, -1):
            chain[:, k] = self.prev[chain[:, k + 1] % self.capacity]
            ok &= (chain[:, k] >= 0) & self._alive(chain[:, k])
        return chain, ok

    def valid(self, slots: np.ndarray) -> np.ndarray:
        """Whether a transition starts at each slot and its stack is complete."""
        slots = np.asarray(slots, dtype=np.int64)
        inside = slots < self.size
        ok = inside & self.has[np.where(inside, slots, 0)]
        _, whole = self._stacks(self._absolute(slots))
        return ok & whole

    def gather(self, slots: np.ndarray) -> Transitions:
        """The transitions at `slots` (valid ones), stacks rebuilt."""
        obs_chain, _ = self._stacks(self._absolute(slots))
        next_chain, _ = self._stacks(self.next[slots])
        cap = self.capacity
        return Transitions(
            self.frames[obs_chain % cap],
            self.action[slots].astype(np.int64),
            self.ret[slots],
            self.frames[next_chain % cap],
            self.discount[slots],
        )

    def sample_slots(self, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """Uniform over the valid transitions: draw, redraw the invalid picks (the
        few whose n steps are not complete, or whose history was overwritten)."""
        if self.count == 0:
            raise ValueError("cannot sample from an empty replay memory")
        slots = rng.integers(0, self.size, size=batch_size)
        for _ in range(REDRAWS):
            bad = ~self.valid(slots)
            if not bad.any():
                return slots
            slots[bad] = rng.integers(0, self.size, size=int(bad.sum()))
        every = np.flatnonzero(self.valid(np.arange(self.size)))
        if every.size == 0:
            raise ValueError("no transition in the replay memory has its whole history")
        bad = ~self.valid(slots)
        slots[bad] = rng.choice(every, size=int(bad.sum()))
        return slots

    def sample(self, batch_size: int, rng: np.random.Generator) -> Transitions:
        return self.gather(self.sample_slots(batch_size, rng))

    def state_dict(self) -> dict[str, Any]:
        n = self.size
        return {
            "kind": "frames",
            "capacity": self.capacity,
            **{
                name: getattr(self, name)[:n]
                for name in ("frames", "prev", "next", "has", "action", "ret", "discount")
            },
            "written": self.written,
            "count": self.count,
            "added": self.added,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The memory as saved; the envs' episodes start anew (no stream continues)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(
                f"saved replay has capacity {state['capacity']}, this one {self.capacity}"
            )
        n = len(state["has"])
        for name in ("frames", "prev", "next", "has", "action", "ret", "discount"):
            getattr(self, name)[:n] = state[name]
        self.written, self.count = int(state["written"]), int(state["count"])
        self.added = int(state["added"])
        self._last = np.full(0, -1, dtype=np.int64)


__all__ = ["FrameReplay"]
