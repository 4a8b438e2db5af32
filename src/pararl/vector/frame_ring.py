"""Frame stacks kept in shared memory as rings of frames, one ring per env.

An env whose outermost wrapper is Gymnasium's `FrameStackObservation` returns its
last K frames on every step, of which only one is new; the wrapper also builds the
stack twice (`concatenate`, then `deepcopy`). When a vector env sees such envs, the
worker steps the wrapped env instead (`FrameStackObservation.env`) and writes only
the newest frame into its row's ring, `frames[row, slot]`, at the slot after
`head[row]`; a reset fills the row the way the wrapper pads (the reset frame
repeated, or its padding value in the older slots). The caller assembles stacked
observations, oldest frame first, from the rings when it reads them: a gather that
is also the copy it hands out, so nothing it holds changes under it.

The stacks equal the wrapper's frame for frame (`tests/vector/test_frames.py`),
for every autoreset mode; what moves per env step is one frame instead of K.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FrameStackObservation


@dataclass(frozen=True)
class StackSpec:
    """How an env stacks its frames: K, and the padding of a reset (None: the reset
    frame itself, Gymnasium's default `padding_type="reset"`)."""

    size: int
    padding: np.ndarray | None


def stack_spec(env: gym.Env[Any, Any]) -> StackSpec | None:
    """The stacking of `env` when rings can carry it (its outermost wrapper is a
    `FrameStackObservation` of an array observation), else None."""
    if type(env) is not FrameStackObservation:
        return None  # a subclass may stack differently
    inner = env.env.observation_space
    if not isinstance(inner, gym.spaces.Box):
        return None
    if env.padding_type == "reset":
        return StackSpec(env.stack_size, None)
    padding = np.asarray(env.padding_value)
    if padding.dtype != inner.dtype or padding.shape != inner.shape:
        return None
    return StackSpec(env.stack_size, padding)


def unstacked(envs: Sequence[gym.Env[Any, Any]], spec: StackSpec, offset: int) -> list[gym.Env]:
    """The envs under each env's `FrameStackObservation`; every env must stack as
    the first env of the vector env does (checked here, where the envs are built)."""
    inner = []
    for index, env in enumerate(envs):
        own = stack_spec(env)
        if own is None or own.size != spec.size or not _same(own.padding, spec.padding):
            raise RuntimeError(
                f"env {offset + index} does not stack frames as env 0 does "
                f"(FrameStackObservation with stack_size={spec.size}, the same padding, "
                "outermost): give every env the same wrappers"
            )
        inner.append(env.env)  # type: ignore[attr-defined]
    return inner


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is b
    return np.array_equal(a, b)


class FrameRing:
    """Stacked observations `[batch, K, ...]` stored as rings: row r's newest frame
    is `frames[r, head[r]]`, the one before it at `head[r] - 1` (mod K), and so on."""

    __slots__ = ("_age", "frames", "head", "padding", "size")

    def __init__(self, frames: np.ndarray, head: np.ndarray, padding: np.ndarray | None) -> None:
        self.frames, self.head, self.padding = frames, head, padding
        self.size = frames.shape[1]
        self._age = np.arange(1, self.size + 1)  # slots after head: oldest ... newest

    # --- the worker writes -------------------------------------------------------

    def write(self, rows: Sequence[int], frames: Sequence[Any], fresh: Sequence[bool]) -> None:
        """Row `rows[i]` gets `frames[i]`: a new episode's first frame if `fresh[i]`
        (the ring is padded), else the frame after its last one."""
        head, ring = self.head, self.frames
        for row, frame, first in zip(rows, frames, fresh, strict=True):
            # Every write moves the head on, a reset's too: envs stepped together
            # keep equal heads, which the caller reads with two block copies.
            slot = head[row] + 1
            slot = 0 if slot == self.size else slot
            if first:
                ring[row] = frame if self.padding is None else self.padding
            ring[row, slot] = frame
            head[row] = slot

    def stacked_with(self, row: int, frame: Any) -> np.ndarray:
        """Row `row`'s stack after `frame`, without writing it (a SAME_STEP final
        observation: the ring row is refilled by the reset in the same step)."""
        out = np.empty_like(self.frames[row])
        out[:-1] = self.frames[row, (self.head[row] + self._age[1:]) % self.size]
        out[-1] = frame
        return out

    # --- the caller reads --------------------------------------------------------

    def take(self, ids: np.ndarray | slice | None) -> np.ndarray:
        """A copy of the stacks of rows `ids` (all when None), oldest frame first."""
        if not isinstance(ids, np.ndarray):  # all rows, or a worker's slice of them
            part = slice(None) if ids is None else ids
            heads = self.head[part]
            if heads.size and (heads == heads[0]).all():  # in step: two block copies
                oldest = (int(heads[0]) + 1) % self.size
                block = self.frames[part]
                return np.concatenate((block[:, oldest:], block[:, :oldest]), axis=1)
        rows = np.arange(self.frames.shape[0])[slice(None) if ids is None else ids]
        slots = (self.head[rows, None] + self._age) % self.size
        return self.frames[rows[:, None], slots]
