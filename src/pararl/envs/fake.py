"""Synthetic envs for tests and benchmarks: a configurable per-step CPU cost with a
heavy-tailed random component, envs that crash or hang on cue, and an env of Dict
or Tuple observations whose answer lies in one leaf (`CueEnv`).

Every step of the step-cost envs burns real CPU (a busy loop on the clock), as a
simulator would; it does not sleep, so it competes for cores like real work.
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


class CueEnv(gym.Env[Any, Any]):
    """Dict (or Tuple) observations of three leaves, one of which holds the answer:
    an `image` (uint8, `image_shape`), a `vector` (4 floats) and a `count` (one of 3
    values). Each step draws a cue c in {0, 1}; the `cue_in` leaf shows it (the
    image's first channel all 255 or all 0, the vector's first entry +1 or -1, the
    count c) and every other value is noise (the image's dim, below 32: loud random
    pixels drown a cue in another leaf for thousands of steps). Reward 1 for the
    action c (Discrete(2)); with `continuous`, a Box action in [-1, 1] earns 1 when
    its sign says c (positive for 1).
    Random play earns about half of each episode's steps, a policy that reads the
    right leaf all of them: whether a multi-input network learns at all, in seconds.
    `render_mode="rgb_array"` renders the image leaf."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}  # noqa: RUF012

    def __init__(
        self,
        cue_in: str = "image",
        tuple_obs: bool = False,
        image_shape: tuple[int, ...] = (3, 16, 16),
        continuous: bool = False,
        render_mode: str | None = None,
    ) -> None:
        if cue_in not in ("image", "vector", "count"):
            raise ValueError(f"cue_in must be image, vector or count, not {cue_in!r}")
        self.cue_in, self.tuple_obs, self.render_mode = cue_in, tuple_obs, render_mode
        self.image_shape = tuple(image_shape)
        self.channels_last = self.image_shape[-1] < self.image_shape[0]
        leaves: dict[str, spaces.Space[Any]] = {
            "image": spaces.Box(0, 255, self.image_shape, np.uint8),
            "vector": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "count": spaces.Discrete(3),
        }
        self.observation_space = (
            spaces.Tuple(tuple(leaves.values())) if tuple_obs else spaces.Dict(leaves)
        )
        self.continuous = continuous
        self.action_space: spaces.Space[Any] = (
            spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous else spaces.Discrete(2)
        )
        self._cue = 0
        self._image = np.zeros(self.image_shape, np.uint8)

    def _observe(self) -> Any:
        rng, cue = self.np_random, self._cue
        image = rng.integers(0, 32, self.image_shape, dtype=np.uint8)  # dim noise
        vector = rng.uniform(-1.0, 1.0, 4).astype(np.float32)
        count = int(rng.integers(0, 3))
        if self.cue_in == "image":
            first = (..., 0) if self.channels_last else (0, ...)
            image[first] = 255 * cue
        elif self.cue_in == "vector":
            vector[0] = 1.0 if cue else -1.0
        else:
            count = cue
        self._image = image
        obs = {"image": image, "vector": vector, "count": count}
        return tuple(obs.values()) if self.tuple_obs else obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(0, 2))
        return self._observe(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self.continuous:  # the sign of the action is the answer
            reward = float((float(np.asarray(action).ravel()[0]) > 0) == bool(self._cue))
        else:
            reward = float(int(action) == self._cue)
        self._cue = int(self.np_random.integers(0, 2))
        return self._observe(), reward, False, False, {}

    def render(self) -> np.ndarray:
        """The image leaf as an RGB frame `[H, W, 3]`."""
        frame = self._image if self.channels_last else np.moveaxis(self._image, 0, -1)
        if frame.shape[-1] != 3:
            frame = np.repeat(frame[..., :1], 3, axis=-1)
        return np.ascontiguousarray(frame)
