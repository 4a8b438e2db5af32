"""Greedy evaluation: N episodes at once, one per env of a serial vector env."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np

from pararl.vector import SerialVectorEnv

Policy = Callable[[np.ndarray], np.ndarray]  # batch of observations -> batch of actions


class Evaluator:
    """Runs `episodes` greedy episodes in lock-step; reuses its envs between calls."""

    def __init__(self, env_fn: Callable[[], gym.Env], episodes: int, seed: int) -> None:
        self.episodes = episodes
        self.seed = seed
        self.calls = 0
        self.envs = SerialVectorEnv([env_fn] * episodes)

    def run(self, policy: Policy, max_steps: int = 1_000_000) -> np.ndarray:
        """Undiscounted returns of one episode per env (true env reward)."""
        obs, _ = self.envs.reset(seed=self.seed + 7919 * self.calls)
        self.calls += 1
        returns = np.zeros(self.episodes)
        running = np.ones(self.episodes, dtype=bool)
        for _ in range(max_steps):
            obs, reward, terminated, truncated, _ = self.envs.step(policy(obs))
            returns += np.where(running, reward, 0.0)
            running &= ~(terminated | truncated)
            if not running.any():
                break
        return returns

    def close(self) -> None:
        self.envs.close()
