"""Envs, spaces and factories of the conformance scenarios (tests/vector/conformance.py):
module-level so that they pickle (spawn)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from tests.vector.conftest import SPACE_KINDS, EnvFn, SpaceEnv, make_space, sample_from

# --- spaces of every kind -------------------------------------------------------------


class Coin(gym.Space[str]):
    """A user-defined space: "heads" or "tails"."""

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return str(self.np_random.choice(["heads", "tails"]))

    def contains(self, x: Any) -> bool:
        return x in ("heads", "tails")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Coin)

    __hash__ = gym.Space.__hash__


SHAREABLE_KINDS = (*SPACE_KINDS, "nested")
UNSHAREABLE_KINDS = (
    "text",
    "graph",
    "sequence",
    "sequence_stack",
    "oneof",
    "custom",
    "dict_text",
    "tuple_mixed",
)


def any_space(kind: str) -> spaces.Space:
    """conftest's `make_space`, plus deeper nesting and spaces without a fixed layout."""
    if kind in SPACE_KINDS:
        return make_space(kind)
    box = spaces.Box(-1.0, 1.0, (2,), np.float32)
    made: dict[str, Callable[[], spaces.Space]] = {
        "nested": lambda: spaces.Dict(
            {"outer": spaces.Tuple((spaces.Dict({"x": box, "n": spaces.Discrete(3, start=1)}),))}
        ),
        "text": lambda: spaces.Text(4),
        "graph": lambda: spaces.Graph(box, spaces.Discrete(3)),
        "sequence": lambda: spaces.Sequence(spaces.Discrete(4)),
        "sequence_stack": lambda: spaces.Sequence(box, stack=True),
        "oneof": lambda: spaces.OneOf((spaces.Discrete(3), box)),
        "custom": Coin,
        "dict_text": lambda: spaces.Dict({"name": spaces.Text(4), "pos": box}),
        "tuple_mixed": lambda: spaces.Tuple(
            (Coin(), spaces.Sequence(spaces.Discrete(2)), spaces.MultiDiscrete([2, 3]))
        ),
    }
    return made[kind]()


def draw(kind: str, space: spaces.Space, rng: np.random.Generator) -> Any:
    """A value of `space` determined by `rng`."""
    if kind in SHAREABLE_KINDS:
        return sample_from(space, rng)
    space.seed(int(rng.integers(2**31)))
    return space.sample()


def batched_actions(kind: str, n: int, steps: int, seed: int = 0) -> list[Any]:
    """`steps` batched actions for `n` envs of `kind`, the same on every call."""
    space = batch_space(any_space(kind), n)
    space.seed(seed)
    return [space.sample() for _ in range(steps)]


class KindEnv(gym.Env[Any, Any]):
    """Observation and action spaces of one kind; episodes of 3 steps; each value
    depends only on the seed; `info["valid"]` tells whether the action was in the
    action space as received."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.observation_space = any_space(kind)
        self.action_space = any_space(kind)
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return draw(self.kind, self.observation_space, self.np_random), {"t": 0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        valid = bool(self.action_space.contains(action))
        self._t += 1
        obs = draw(self.kind, self.observation_space, self.np_random)
        return obs, float(self.np_random.normal()), self._t >= 3, False, {"valid": valid}


def kind_fns(kind: str, n: int = 2) -> list[EnvFn]:
    return [functools.partial(KindEnv, kind) for _ in range(n)]


# --- envs for the other scenarios --------------------------------------------------------


class BoundsEnv(gym.Env[np.ndarray, np.int64]):
    """Box(-high, high, shape) observations, Discrete(actions) actions."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, high: float, shape: tuple[int, ...] = (2,), actions: int = 3) -> None:
        self.observation_space = spaces.Box(-high, high, shape, np.float32)
        self.action_space = spaces.Discrete(actions)

    def _obs(self) -> np.ndarray:
        space = self.observation_space
        return self.np_random.uniform(space.low, space.high).astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self._obs(), float(action), False, False, {}


def bounds_fn(high: float, shape: tuple[int, ...] = (2,), actions: int = 3) -> EnvFn:
    return functools.partial(BoundsEnv, high, shape, actions)


class EnvFaultError(ValueError):
    """A user-defined exception raised inside an env."""


class FaultyEnv(BoundsEnv):
    """Raises `ValueError` or `EnvFaultError` in `where` ("step", "reset" or "call": its
    `explode` method) when `fail` is set."""

    def __init__(self, fail: bool, where: str, exc: str) -> None:
        super().__init__(1.0)
        self.fail, self.where, self.exc = fail, where, exc

    def _maybe_fail(self, where: str) -> None:
        if self.fail and where == self.where:
            kind = EnvFaultError if self.exc == "EnvFaultError" else ValueError
            raise kind(f"env exploded in {where}")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        self._maybe_fail("reset")
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._maybe_fail("step")
        return super().step(action)

    def explode(self) -> str:
        self._maybe_fail("call")
        return "fine"


class ProbeEnv(gym.Env[np.ndarray, Any]):
    """Records the type, dtype and shape of every action it gets (`seen`); with
    `sleep`, its step also sleeps `action` seconds (a float64 Box action: `time.sleep`
    refuses numpy's float32 scalars and 0-d arrays, so the type matters)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, kind: str) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = {
            "discrete": lambda: spaces.Discrete(3),
            "box": lambda: spaces.Box(-1.0, 1.0, (2,), np.float32),
            "multidiscrete": lambda: spaces.MultiDiscrete([2, 3]),
            "sleep": lambda: spaces.Box(0.0, 0.5, (), np.float64),  # time.sleep takes float64
        }[kind]()
        self.kind = kind
        self.seen: list[tuple[str, str, tuple[int, ...]]] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        dtype = str(getattr(action, "dtype", "-"))
        self.seen.append((type(action).__name__, dtype, np.shape(action)))
        if self.kind == "sleep":
            time.sleep(action)
            self.seen.append(("float", type(float(action)).__name__, ()))
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def nap(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds


def probe_fns(kind: str, n: int = 2) -> list[EnvFn]:
    return [functools.partial(ProbeEnv, kind) for _ in range(n)]


class CallEnv(SpaceEnv):
    """conftest's SpaceEnv ("box"), renderable, with a method of mixed results."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 4}  # noqa: RUF012

    def __init__(self) -> None:
        super().__init__("box", episode_len=4)
        self.render_mode = "rgb_array"

    def render(self) -> np.ndarray:
        return np.full((2, 3, 3), self._t, np.uint8)

    def probe(self, x: Any, *, scale: int = 1) -> tuple[Any, ...]:
        return x * scale, np.float32(0.5), {"t": self._t, "label": self.label}, None


def doubled(env_fn: EnvFn) -> gym.Env:
    return gym.wrappers.TransformReward(env_fn(), functools.partial(np.multiply, 2.0))


def doubling_worker(index: int, env_fn: EnvFn, *rest: Any) -> None:
    """A custom Gymnasium worker (8 arguments): Gymnasium's own, over envs whose
    rewards it doubles."""
    from gymnasium.vector.async_vector_env import _async_worker

    _async_worker(index, functools.partial(doubled, env_fn), *rest)
