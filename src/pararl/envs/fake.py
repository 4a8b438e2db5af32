"""Synthetic envs for tests and benchmarks: a configurable per-step CPU cost with a
heavy-tailed random component, and envs that crash or hang on cue.

Every step burns real CPU (a busy loop on the clock), as a simulator would; it
does not sleep, so it competes for cores like real work.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces


def burn(seconds: float) -> None:
    """Spend `seconds` of CPU time in this thread."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class StepCostEnv(gym.Env[np.ndarray, np.int64]):
    """A seeded random walk whose steps cost `cost_us` microseconds of CPU, plus a
    heavy tail: with `tail_alpha > 0`, each step costs `cost_us * (1 + Pareto(alpha))`
    (mean `cost_us * alpha / (alpha - 1)` for alpha > 1; smaller alpha = heavier tail).

    Observations depend only on the seed and the actions, so runs can be compared
    bit for bit across vector-env backends.
    """

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it so

    def __init__(
        self,
        obs_dim: int = 8,
        cost_us: float = 0.0,
        tail_alpha: float = 0.0,
        episode_length: int = 200,
        render_mode: str | None = None,
    ) -> None:
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.cost_s = cost_us * 1e-6
        self.tail_alpha = tail_alpha
        self.episode_length = episode_length
        self._state = np.zeros(obs_dim, dtype=np.float32)
        self._t = 0
        self._cost_rng = np.random.default_rng()

    def _step_cost(self) -> float:
        if self.tail_alpha > 0:
            return self.cost_s * (1.0 + float(self._cost_rng.pareto(self.tail_alpha)))
        return self.cost_s

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._state = self.np_random.normal(size=self._state.shape).astype(np.float32)
        return self._state.copy(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.cost_s:
            burn(self._step_cost())
        self._t += 1
        drift = 0.1 if int(action) == 1 else -0.1
        noise = self.np_random.normal(scale=0.1, size=self._state.shape)
        self._state = (self._state + drift + noise).astype(np.float32)
        terminated = bool(abs(float(self._state[0])) > 3.0)
        truncated = self._t >= self.episode_length and not terminated
        return self._state.copy(), float(self._state[0]), terminated, truncated, {"t": self._t}


class FaultyEnv(StepCostEnv):
    """Fails on cue, to test that failures are reported and nothing hangs.

    `fail_on`: "step" or "reset"; `at`: fail on that call number (1-based) of this
    env; `how`: "raise" (RuntimeError), "segfault" (SIGSEGV), "exit" (os._exit(3)) or
    "hang" (sleep for an hour).
    """

    def __init__(
        self, fail_on: str = "step", at: int = 1, how: str = "raise", render_mode: str | None = None
    ) -> None:
        super().__init__(render_mode=render_mode)
        self.fail_on, self.at, self.how = fail_on, at, how
        self._calls = {"step": 0, "reset": 0}

    def _maybe_fail(self, call: str) -> None:
        self._calls[call] += 1
        if call != self.fail_on or self._calls[call] != self.at:
            return
        if self.how == "raise":
            raise RuntimeError(f"FaultyEnv failed on {call} #{self.at}")
        if self.how == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.how == "exit":
            os._exit(3)
        if self.how == "hang":
            time.sleep(3600)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._maybe_fail("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._maybe_fail("step")
        return super().step(action)


class NeverEndsEnv(StepCostEnv):
    """A `StepCostEnv` whose episodes never end, by termination or by time: what a
    greedy policy that stays alive in an env without a time limit looks like to an
    evaluation. Reward 1 per step."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, _, _, _, info = super().step(action)
        return obs, 1.0, False, False, info


class SeedLogEnv(StepCostEnv):
    """A `StepCostEnv` that appends every reset seed it is given to a file of its
    process in the directory `$PARARL_SEED_LOG` (tests: which seeds every env of
    every worker, actor, replica and evaluation really got)."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        log_dir = os.environ.get("PARARL_SEED_LOG")
        if seed is not None and log_dir:
            with open(os.path.join(log_dir, f"{os.getpid()}.log"), "a") as log:
                log.write(f"{seed}\n")
        return super().reset(seed=seed, options=options)
