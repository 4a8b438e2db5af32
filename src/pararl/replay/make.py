"""The replay memory a DQN run learns from, chosen from its observations: each frame
stored once when they are stacked `uint8` images, whole observations otherwise;
prioritized sampling over either on request."""

from __future__ import annotations

import numpy.typing as npt

from pararl.replay.frame_memory import FrameReplay
from pararl.replay.prioritized import PrioritizedReplay
from pararl.replay.uniform import ReplayBuffer

Replay = ReplayBuffer | FrameReplay | PrioritizedReplay


def make_replay(
    capacity: int,
    obs_shape: tuple[int, ...],
    obs_dtype: npt.DTypeLike,
    frame_stack: int,
    prioritized: bool,
    alpha: float,
) -> Replay:
    """The memory for these observations: frames stored once when they are stacked
    `uint8` images (`frame_stack` > 0), whole observations otherwise; prioritized
    on request."""
    memory: ReplayBuffer | FrameReplay
    if frame_stack > 0:
        memory = FrameReplay(capacity, obs_shape)
    else:
        memory = ReplayBuffer(capacity, obs_shape, obs_dtype)
    return PrioritizedReplay(memory, alpha) if prioritized else memory


__all__ = ["Replay", "make_replay"]
