"""Greedy evaluation: N episodes at once, one per env of a serial vector env.

`Evaluator` runs them in the calling process. `BackgroundEvaluator`
(`pararl.evaluation.background`) runs the same code in a child process so that training goes
on meanwhile; both answer `submit` / `poll`, so the session treats them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import gymnasium as gym
import numpy as np

from pararl import seeding
from pararl.vector import SerialVectorEnv

Policy = Callable[[np.ndarray], np.ndarray]  # batch of observations -> batch of actions


class GreedyModel(Protocol):
    """A network that can act greedily and be copied (QNetwork, ActorCritic)."""

    def greedy(self, obs: np.ndarray) -> np.ndarray: ...

    def state_dict(self) -> dict: ...


def as_policy(policy: Policy | GreedyModel) -> Policy:
    greedy = getattr(policy, "greedy", None)
    return greedy if callable(greedy) else policy  # type: ignore[return-value]


class Evaluator:
    """Runs `episodes` greedy episodes in lock-step; reuses its envs between calls.
    Evaluation k resets its envs with the stream `("eval", *stream, k)` of the run's
    seed; a training run's `stream` is the env step it (re)started at."""

    deferred = False  # results are ready as soon as `submit` returns

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        episodes: int,
        seed: int,
        stream: tuple[int, ...] = (),
    ) -> None:
        self.episodes = episodes
        self.seed, self.stream = seed, stream
        self.calls = 0
        self.envs = SerialVectorEnv([env_fn] * episodes)
        self._result: np.ndarray | None = None

    def run(self, policy: Policy, max_steps: int = 1_000_000) -> np.ndarray:
        """Undiscounted returns of one episode per env (true env reward)."""
        obs, _ = self.envs.reset(
            seed=seeding.env_seeds(self.seed, self.episodes, "eval", *self.stream, self.calls)
        )
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

    @property
    def busy(self) -> bool:
        return False

    def submit(self, policy: Policy | GreedyModel) -> None:
        self._result = self.run(as_policy(policy))

    def poll(self, timeout: float = 0.0) -> np.ndarray | None:
        """The returns of the last `submit`, once (None if already taken)."""
        del timeout
        result, self._result = self._result, None
        return result

    def close(self) -> None:
        self.envs.close()
