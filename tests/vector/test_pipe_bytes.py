"""What crosses the pipes per step is commands and small replies: it does not grow
with the size of the observations, which go through shared memory."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from pararl.vector import ParallelVectorEnv

pytestmark = pytest.mark.timeout(60)


class FrameEnv(gym.Env[np.ndarray, np.int64]):
    """uint8 frames of `side`×`side` pixels, a new one each step."""

    def __init__(self, side: int) -> None:
        self.observation_space = spaces.Box(0, 255, (4, side, side), np.uint8)
        self.action_space = spaces.Discrete(4)
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        return self.observation_space.sample(), 1.0, self._t % 25 == 0, False, {}


def bytes_per_step(side: int, mode: str, steps: int = 60) -> tuple[float, float]:
    vec = ParallelVectorEnv(
        [functools.partial(FrameEnv, side)] * 4, num_workers=2, autoreset_mode=mode
    )
    try:
        vec.reset(seed=0)
        before = vec.pipe_bytes
        actions = np.zeros(4, np.int64)
        for _ in range(steps):
            vec.step(actions)
        after = vec.pipe_bytes
    finally:
        vec.close()
    return (after[0] - before[0]) / steps, (after[1] - before[1]) / steps


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_pipe_bytes_per_step_do_not_grow_with_the_frames(mode: str) -> None:
    small = bytes_per_step(84, mode)  # 28 KB of observation per env per step
    large = bytes_per_step(336, mode)  # 452 KB
    assert small == large
    sent, received = small
    assert sent < 100  # a step command per worker (22 bytes each today)
    assert received < 200  # replies: empty infos, and episode ends every 25 steps
