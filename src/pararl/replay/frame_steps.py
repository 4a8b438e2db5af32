"""Chunks of stacked image observations that carry each frame once.

An env wrapped in Gymnasium's `FrameStackObservation` (reset padding) returns
stacks of its last S frames: consecutive observations share S-1 of them, and an
episode's first observation is S copies of its first frame. So every new
observation adds exactly one frame, and an actor's chunk carries only that:

    frames[F, *frame]   the newest frame of each new observation, time-major
                        (vector step by vector step, env by env)
    stream[F]           which env it came from (an id unique in the run)
    prev[F]             the chunk index of the frame before it in its episode:
                        its own index at an episode start (the padding repeats
                        it), -1 when that frame came in an earlier chunk
    next, steps [T]     per n-step transition: the chunk index of its next
                        observation, and how many frames back its observation is
    action, ret, discount [T] (and the actor's priority, Ape-X)

The replay memory (`replay.frame_memory`) stores the frames once and rebuilds the
stacks by following `prev` links. n-step returns are the same code as for vector
observations (`replay.nstep`), run on observation keys instead of arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from pararl.errors import UsageError
from pararl.replay.nstep import NStepBuilder, Transitions

FRAME_FIELDS = ("frames", "stream", "prev")  # one row per frame
TRANSITION_FIELDS = ("next", "steps", "action", "ret", "discount", "priority")  # per transition


@dataclass
class FrameSteps:
    """A chunk of frames and the n-step transitions between them (see module doc)."""

    frames: np.ndarray
    stream: np.ndarray
    prev: np.ndarray
    next: np.ndarray
    steps: np.ndarray
    action: np.ndarray
    ret: np.ndarray
    discount: np.ndarray
    priority: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.action.shape[0])

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])


def frame_count(batch: object) -> int:
    """Frames a chunk's payload carries (0 for whole observations)."""
    return batch.num_frames if isinstance(batch, FrameSteps) else 0


def stack_size(env: gym.Env) -> int:
    """S when `env`'s observations are `FrameStackObservation` stacks of S uint8
    frames with reset padding (nothing above the stacking changes observations);
    0 otherwise (then a replay stores whole observations)."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, gym.wrappers.FrameStackObservation):
            space = env.observation_space
            if not isinstance(space, gym.spaces.Box) or env.padding_type != "reset":
                return 0
            images = space.dtype == np.uint8 and len(space.shape) >= 3
            return env.stack_size if images else 0
        if env.observation_space != env.env.observation_space:
            return 0  # a wrapper above the stack changes the observations
        env = env.env
    return 0


class FrameStepBuilder:
    """The acting side: turns lock-step vector-env steps of stacked observations into
    `FrameSteps` chunks. Each env's observations are numbered (`key = position *
    num_envs + env`); n-step transitions are built on those keys by `NStepBuilder`,
    so truncation and termination are treated exactly as for vector observations.
    `keep` > 0 keeps each env's last `keep` whole observations (for the actor's
    initial priorities: `observations(keys)`)."""

    def __init__(
        self,
        num_envs: int,
        obs_shape: tuple[int, ...],
        n: int,
        gamma: float,
        stream_base: int = 0,
        keep: int = 0,
    ) -> None:
        self.num_envs = num_envs
        self.streams = stream_base + np.arange(num_envs)
        self.nstep = NStepBuilder(num_envs, (), n, gamma, obs_dtype=np.int64)
        self._pos = np.zeros(num_envs, dtype=np.int64)  # observations seen, per env
        self._chunk_pos = np.zeros(num_envs, dtype=np.int64)  # position of the chunk's first
        self._after_end = np.zeros(num_envs, dtype=np.bool_)
        self._frames: list[np.ndarray] = []
        self._first: list[np.ndarray] = []
        self._parts: list[Transitions] = []
        self.keep = keep
        self._kept = np.zeros((num_envs, keep, *obs_shape), np.uint8) if keep else None

    def _keys(self) -> np.ndarray:
        return self._pos * self.num_envs + np.arange(self.num_envs)

    def _observe(self, obs: np.ndarray, first: np.ndarray) -> None:
        for env in np.flatnonzero(first):
            if not (obs[env] == obs[env, -1]).all():
                raise UsageError(
                    "stacked observations must start as copies of the episode's first "
                    "frame (FrameStackObservation's reset padding) to be stored frame by frame"
                )
        if self._kept is not None:
            self._kept[np.arange(self.num_envs), self._pos % self.keep] = obs
        self._frames.append(obs[:, -1].copy())
        self._first.append(first.copy())

    def reset(self, obs: np.ndarray) -> None:
        """The observations the envs were reset to (episode starts)."""
        self._observe(obs, np.ones(self.num_envs, dtype=np.bool_))

    def add(
        self,
        obs: np.ndarray,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """One vector step: `obs` was acted on, `next_obs` came back (an episode's
        first observation where the step was a reset step of NEXT_STEP autoreset)."""
        del obs  # what it needs of it is its key
        keys = self._keys()
        first = self._after_end
        self._pos += 1
        self._observe(next_obs, first)
        self._parts.append(
            self.nstep.add(keys, action, reward, self._keys(), terminated, truncated)
        )
        self._after_end = ~first & (terminated | truncated)

    def observations(self, keys: np.ndarray) -> np.ndarray:
        """The whole observations of these keys (kept ones only)."""
        assert self._kept is not None
        env, pos = keys % self.num_envs, keys // self.num_envs
        return self._kept[env, pos % self.keep]

    def chunk(self) -> tuple[FrameSteps, np.ndarray, np.ndarray]:
        """The frames and transitions since the last chunk, and the transitions'
        observation and next-observation keys."""
        e = self.num_envs
        frames = np.concatenate(self._frames)
        first = np.concatenate(self._first)
        index = np.arange(len(frames))
        prev = np.where(index >= e, index - e, -1)
        prev = np.where(first, index, prev)
        obs_keys = _field(self._parts, "obs", np.int64)
        next_keys = _field(self._parts, "next_obs", np.int64)
        env, next_pos = next_keys % e, next_keys // e
        out = FrameSteps(
            frames=frames,
            stream=np.tile(self.streams, len(frames) // e),
            prev=prev,
            next=(next_pos - self._chunk_pos[env]) * e + env,
            steps=(next_keys - obs_keys) // e,
            action=_field(self._parts, "action", np.int64),
            ret=_field(self._parts, "ret", np.float32),
            discount=_field(self._parts, "discount", np.float32),
        )
        self._frames, self._first, self._parts = [], [], []
        self._chunk_pos = self._pos + 1  # the next frame of each env is the next chunk's first
        return out, obs_keys, next_keys


def _field(parts: list[Transitions], name: str, dtype: type) -> np.ndarray:
    """One field of the n-step parts, concatenated (empty when there are none)."""
    if not parts:
        return np.zeros(0, dtype=dtype)
    return np.concatenate([getattr(p, name) for p in parts]).astype(dtype)


__all__ = [
    "FRAME_FIELDS",
    "TRANSITION_FIELDS",
    "FrameStepBuilder",
    "FrameSteps",
    "frame_count",
    "stack_size",
]
