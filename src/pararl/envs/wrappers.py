"""Env wrappers."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np


class ClipToBounds(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """Box actions clipped to the env's bounds before they reach it: a Gaussian policy
    samples beyond them. The action space stays the env's own, bounds and all
    (Gymnasium's `ClipAction` makes it unbounded, which tells whoever samples random
    actions from it, or reads the bounds off it, something the env never said)."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)  # `gym.make(env.spec)` rebuilds it
        gym.ActionWrapper.__init__(self, env)
        space = env.action_space
        if not isinstance(space, gym.spaces.Box):
            raise TypeError(f"ClipToBounds needs Box actions, not {space}")
        self._low, self._high = space.low, space.high

    def action(self, action: Any) -> np.ndarray:
        return np.clip(action, self._low, self._high)


class CartPoleShapedReward(gym.RewardWrapper):
    """The CartPole shaping of the multi-process DQN post (docs/design/sources.md): reward
    staying near the centre and upright.

    r = 3 * ((x_thr - |x|) / x_thr - 0.8) + ((theta_thr - |theta|) / theta_thr - 0.5)
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        base = env.unwrapped
        self.x_threshold = float(getattr(base, "x_threshold", 2.4))
        self.theta_threshold = float(getattr(base, "theta_threshold_radians", 12 * np.pi / 180))
        self._obs: np.ndarray | None = None

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, _reward, terminated, truncated, info = self.env.step(action)
        x, theta = float(obs[0]), float(obs[2])
        shaped = 3.0 * ((self.x_threshold - abs(x)) / self.x_threshold - 0.8) + (
            (self.theta_threshold - abs(theta)) / self.theta_threshold - 0.5
        )
        return obs, shaped, terminated, truncated, info

    def reward(self, reward: SupportsFloat) -> SupportsFloat:  # step() is overridden
        return reward
