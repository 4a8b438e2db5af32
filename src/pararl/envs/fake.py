"""Synthetic envs for tests and benchmarks: a configurable per-step CPU cost with a
heavy-tailed random component, envs that crash or hang on cue, envs of
MultiDiscrete, MultiBinary and masked actions (`TargetEnv`, `MaskedChoiceEnv`), and
an env of Dict or Tuple observations whose answer lies in one leaf (`CueEnv`).

Every step of the step-cost envs burns real CPU (a busy loop on the clock), as a
simulator would; it does not sleep, so it competes for cores like real work. Only
`pararl/SlowStep-v0` sleeps instead: a slow stream of steps that leaves the cores to
the rest of the machine (tests that kill an actor mid-rollout).
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
    With `sleeps`, a step sleeps its cost instead of burning it.

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
        sleeps: bool = False,
    ) -> None:
        self.render_mode = render_mode
        self.observation_space = spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.cost_s = cost_us * 1e-6
        self.tail_alpha = tail_alpha
        self.episode_length = episode_length
        self._spend = time.sleep if sleeps else burn
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
            self._spend(self._step_cost())
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
    "hang" (sleep for an hour); `seeded`: only an env first reset with this seed fails
    (None: every one), so that one env of many can be made to fail wherever it runs.
    """

    def __init__(
        self,
        fail_on: str = "step",
        at: int = 1,
        how: str = "raise",
        render_mode: str | None = None,
        seeded: int | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        self.fail_on, self.at, self.how, self.seeded = fail_on, at, how, seeded
        self._calls = {"step": 0, "reset": 0}
        self._first_seed: int | None = None

    def _maybe_fail(self, call: str) -> None:
        self._calls[call] += 1
        if call != self.fail_on or self._calls[call] != self.at:
            return
        if self.seeded is not None and self._first_seed != self.seeded:
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
        if self._first_seed is None:
            self._first_seed = seed
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


class IllegalActionError(RuntimeError):
    """An action the env's mask did not allow reached its `step`."""


class TargetEnv(gym.Env[np.ndarray, np.ndarray]):
    """A contextual bandit for many-dimensional discrete actions: each step shows a
    random target and pays the fraction of the action's dimensions that hit it, for
    `episode_length` steps. `nvec` given: MultiDiscrete actions, the target one-hot
    per dimension; else MultiBinary(`bits`), the target's bits as +-1. A policy learns
    it in a few thousand steps (return `episode_length`; uniform actions get the
    mean of 1/n over the dimensions, or 1/2).

    `masked` (MultiDiscrete): each dimension allows a random half of its values (the
    target's always among them); an action outside them raises `IllegalActionError`.
    `MaskedTargetEnv` says which they are."""

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it so

    def __init__(
        self,
        nvec: tuple[int, ...] | None = None,
        bits: int = 4,
        episode_length: int = 8,
        masked: bool = False,
        render_mode: str | None = None,
    ) -> None:
        self.render_mode, self.episode_length = render_mode, episode_length
        self.nvec = None if nvec is None else np.asarray(nvec, np.int64)
        if self.nvec is not None:
            self.action_space: spaces.Space = spaces.MultiDiscrete(self.nvec)
            size = int(self.nvec.sum())
        else:
            if masked:
                raise ValueError("masks here are for MultiDiscrete actions (give nvec)")
            self.action_space = spaces.MultiBinary(bits)
            size = bits
        self.observation_space = spaces.Box(-1.0, 1.0, (size,), np.float32)
        self.masked = masked
        self._target = np.zeros(len(self.nvec) if self.nvec is not None else bits, np.int64)
        self._mask = np.ones(size, bool)
        self._t = 0

    def _draw(self) -> np.ndarray:
        rng = self.np_random
        if self.nvec is None:
            self._target = rng.integers(0, 2, len(self._target))
            return (2.0 * self._target - 1).astype(np.float32)
        self._target = rng.integers(0, self.nvec)
        obs, masks = [], []
        for n, target in zip(self.nvec.tolist(), self._target.tolist(), strict=True):
            obs.append(np.eye(n, dtype=np.float32)[target])
            legal = rng.random(n) < 0.5 if self.masked else np.ones(n, bool)
            legal[target] = True
            masks.append(legal)
        self._mask = np.concatenate(masks)
        return np.concatenate(obs)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = np.asarray(action).ravel()
        if self.masked:
            assert self.nvec is not None
            offsets = np.concatenate([[0], np.cumsum(self.nvec)[:-1]])
            if not self._mask[offsets + action].all():
                raise IllegalActionError(f"action {action.tolist()} is outside the mask")
        reward = float((action == self._target).mean())
        self._t += 1
        return self._draw(), reward, False, self._t >= self.episode_length, {}


class MaskedTargetEnv(TargetEnv):
    """A masked MultiDiscrete `TargetEnv` that says its masks by `action_masks()`
    (each dimension's legal values, one dimension after another)."""

    def __init__(
        self,
        nvec: tuple[int, ...] = (3, 4),
        episode_length: int = 8,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(nvec, episode_length=episode_length, masked=True, render_mode=render_mode)

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()


class MaskedChoiceInfoEnv(gym.Env[np.ndarray, np.int64]):
    """Discrete(`n`) actions of which a random subset is legal at each step (each
    with probability 1/2, at least one); the observation is that subset (1 legal, 0
    not), and the highest legal action pays 1, any other legal one 0, for
    `episode_length` steps. An illegal action raises `IllegalActionError`: a policy
    that ignores the mask fails at once. The mask comes in `info["action_mask"]`
    (`MaskedChoiceEnv`: from `action_masks()` instead)."""

    metadata = {"render_modes": []}  # noqa: RUF012 - Gymnasium declares it so
    in_info = True

    def __init__(
        self, n: int = 4, episode_length: int = 10, render_mode: str | None = None
    ) -> None:
        self.render_mode, self.episode_length = render_mode, episode_length
        self.observation_space = spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = spaces.Discrete(n)
        self._mask = np.ones(n, bool)
        self._t = 0

    def _draw(self) -> tuple[np.ndarray, dict[str, Any]]:
        mask = self.np_random.random(self._mask.size) < 0.5
        mask[self.np_random.integers(self._mask.size)] = True
        self._mask = mask
        info = {"action_mask": mask.copy()} if self.in_info else {}
        return mask.astype(np.float32), info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._draw()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        action = int(action)
        if not self._mask[action]:
            raise IllegalActionError(
                f"action {action} is outside the mask {self._mask.astype(int).tolist()}"
            )
        reward = float(action == int(np.flatnonzero(self._mask)[-1]))
        self._t += 1
        obs, info = self._draw()
        return obs, reward, False, self._t >= self.episode_length, info


class MaskedChoiceEnv(MaskedChoiceInfoEnv):
    """`MaskedChoiceInfoEnv` whose mask comes from `action_masks()`, as sb3-contrib's
    MaskablePPO reads it."""

    in_info = False

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()


class CueEnv(gym.Env[Any, Any]):
    """Dict (or Tuple) observations of three leaves, one of which holds the answer:
    an `image` (uint8, `image_shape`), a `vector` (4 floats) and a `count` (one of 3
    values). Each step draws a cue c in {0, 1}; the `cue_in` leaf shows it (the
    image's first channel all 255 or all 0, the vector's first entry +1 or -1, the
    count c) and every other value is noise (the image's dim, below 32: loud random
    pixels drown a cue in another leaf for thousands of steps). Reward 1 for the
    action c (Discrete(2)); with `continuous`, a Box action in [-1, 1] earns 1 when
    its sign says c (positive for 1). `bare`: the count alone, as a bare Discrete(3)
    observation that holds the cue (`cue_in` count).
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
        bare: bool = False,
    ) -> None:
        if cue_in not in ("image", "vector", "count"):
            raise ValueError(f"cue_in must be image, vector or count, not {cue_in!r}")
        if bare and cue_in != "count":
            raise ValueError("a bare observation is the count: give cue_in='count'")
        self.cue_in, self.tuple_obs, self.render_mode = cue_in, tuple_obs, render_mode
        self.bare = bare
        self.image_shape = tuple(image_shape)
        self.channels_last = self.image_shape[-1] < self.image_shape[0]
        leaves: dict[str, spaces.Space[Any]] = {
            "image": spaces.Box(0, 255, self.image_shape, np.uint8),
            "vector": spaces.Box(-1.0, 1.0, (4,), np.float32),
            "count": spaces.Discrete(3),
        }
        self.observation_space: spaces.Space[Any] = (
            spaces.Tuple(tuple(leaves.values())) if tuple_obs else spaces.Dict(leaves)
        )
        if bare:
            self.observation_space = leaves["count"]
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
        if self.bare:
            return count
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
