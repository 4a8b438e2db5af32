"""The replay memory an off-policy run (DQN, SAC, TD3) learns from, chosen from its
observations: each frame stored once when they are stacked `uint8` images, whole
observations otherwise; prioritized sampling over either on request."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pararl.observations import Leaf
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
    action_shape: tuple[int, ...] = (),
    action_dtype: npt.DTypeLike = np.int64,
    mask_size: int = 0,
    leaves: Sequence[Leaf] = (),
) -> Replay:
    """The memory for these observations: frames stored once when they are stacked
    `uint8` images (`frame_stack` > 0; discrete actions only, without masks), whole
    observations otherwise (Dict and Tuple observations, given as their `leaves`: one
    ring per leaf); prioritized on request. Actions: indices by default, or rows of
    `action_shape` (continuous actions); `mask_size` > 0: each transition's next
    action mask too."""
    memory: ReplayBuffer | FrameReplay
    if frame_stack > 0:
        if action_shape != () or mask_size:
            raise ValueError("the frame memory stores discrete actions only, without masks")
        memory = FrameReplay(capacity, obs_shape)
    else:
        memory = ReplayBuffer(
            capacity, obs_shape, obs_dtype, action_shape, action_dtype, mask_size, leaves
        )
    return PrioritizedReplay(memory, alpha) if prioritized else memory


def slot_bytes(
    obs_shape: tuple[int, ...],
    obs_dtype: npt.DTypeLike,
    frame_stack: int,
    action_shape: tuple[int, ...] = (),
    action_dtype: npt.DTypeLike = np.int64,
    mask_size: int = 0,
    leaves: Sequence[Leaf] = (),
) -> int:
    """Bytes per slot of the memory `make_replay` makes for these observations (without
    prioritized replay's sum tree): what a memory of `capacity` slots takes once full."""
    if frame_stack > 0:
        return FrameReplay.slot_bytes(obs_shape)
    return ReplayBuffer.slot_bytes(
        obs_shape, obs_dtype, action_shape, action_dtype, mask_size, leaves
    )


__all__ = ["Replay", "make_replay", "slot_bytes"]
