"""Shared helpers for the vector-env tests: small seeded envs over every supported
space type, an env with tasks, env factories that also work under spawn/forkserver,
tree comparison, and process / shared-memory bookkeeping.

Factories handed to worker processes are module-level functions here (wrapped in
`functools.partial`), so a spawned worker imports this module by name and the
`pararl/...` env ids get registered there too.
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from gymnasium import spaces

import pararl.envs  # noqa: F401 - registers pararl/StepCost-v0 and pararl/Faulty-v0
from pararl.vector import ParallelVectorEnv, SerialVectorEnv
from pararl.vector.core import BatchVectorEnv
from tests.procs import (  # noqa: F401  (used by the vector tests)
    alive_after,
    new_shm_entries,
    pid_alive,
    shm_entries,
)

EnvFn = Callable[[], gym.Env]

# --- spaces ---------------------------------------------------------------------------

SPACE_KINDS = ("box", "discrete", "multidiscrete", "multibinary", "dict", "tuple")


def make_space(kind: str) -> spaces.Space:
    """A small space of `kind`; Dict and Tuple nest the simple kinds."""
    if kind == "box":
        return spaces.Box(-2.0, 2.0, (3,), np.float32)
    if kind == "discrete":
        return spaces.Discrete(5, start=-2)
    if kind == "multidiscrete":
        return spaces.MultiDiscrete([3, 4, 2])
    if kind == "multibinary":
        return spaces.MultiBinary(4)
    if kind == "dict":
        return spaces.Dict(
            {
                "pos": spaces.Box(-1.0, 1.0, (2,), np.float64),
                "mode": spaces.Discrete(3),
                "pair": spaces.Tuple((spaces.MultiBinary(2), spaces.MultiDiscrete([2, 5]))),
            }
        )
    if kind == "tuple":
        return spaces.Tuple(
            (
                spaces.Discrete(4),
                spaces.Box(0.0, 1.0, (2, 2), np.float32),
                spaces.Dict({"bits": spaces.MultiBinary(3)}),
            )
        )
    raise ValueError(f"unknown space kind {kind!r}")


def sample_from(space: spaces.Space, rng: np.random.Generator) -> Any:
    """A value of `space` drawn from `rng` (spaces' own sample() uses their own rng)."""
    if isinstance(space, spaces.Box):
        return rng.uniform(space.low, space.high, space.shape).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return np.int64(int(space.start) + int(rng.integers(int(space.n))))
    if isinstance(space, spaces.MultiDiscrete):
        return (space.start + rng.integers(0, space.nvec)).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, space.shape).astype(space.dtype)
    if isinstance(space, spaces.Dict):
        return {key: sample_from(sub, rng) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(sample_from(sub, rng) for sub in space.spaces)
    raise TypeError(type(space).__name__)


def encode(value: Any) -> int:
    """A non-negative integer summarising a (nested) value: obs depend on actions."""
    if isinstance(value, dict):
        return sum((i + 1) * encode(value[k]) for i, k in enumerate(sorted(value)))
    if isinstance(value, tuple):
        return sum((i + 1) * encode(v) for i, v in enumerate(value))
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    weights = np.arange(1, arr.size + 1)
    return int(abs(np.round(arr * 1000) @ weights)) % (2**31)


class SpaceEnv(gym.Env[Any, Any]):
    """A seeded env with observation and action spaces of one kind.

    Observations, rewards and ends depend only on the seed and the actions taken.
    Infos vary in keys and types from step to step, so that batched infos exercise
    the `_key` masks, dtype inference and nesting.
    """

    metadata: dict[str, Any] = {"render_modes": [], "tag": "space-env"}  # noqa: RUF012

    def __init__(self, kind: str = "box", episode_len: int = 6, p_end: float = 0.15) -> None:
        self.kind = kind
        self.observation_space = make_space(kind)
        self.action_space = make_space(kind)
        self.episode_len = episode_len
        self.p_end = p_end
        self.label = "none"
        self._t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = int((options or {}).get("start_t", 0))
        obs = sample_from(self.observation_space, self.np_random)
        info: dict[str, Any] = {"start": np.float32(self.np_random.random())}
        if options:
            info["options"] = dict(options)
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        assert self.action_space.contains(action), (action, self.action_space)
        code = encode(action)
        rng = np.random.default_rng([int(self.np_random.integers(2**31)), code])
        self._t += 1
        obs = sample_from(self.observation_space, rng)
        reward = float(rng.normal())
        terminated = bool(rng.random() < self.p_end)
        truncated = self._t >= self.episode_len and not terminated
        info: dict[str, Any] = {
            "t": self._t,
            "code": np.int32(code % 1000),
            "hist": np.array([self._t, code % 7], dtype=np.int16),
        }
        if self._t % 2 == 0:
            info["even"] = True
        if terminated:
            info["why"] = "terminated"
        if self._t % 3 == 0:
            info["detail"] = {"reward": reward, "obs_code": np.int64(encode(obs))}
        return obs, reward, terminated, truncated, info

    def scaled(self, factor: int, *, offset: int = 0) -> str:
        """A method for `call` tests: depends on arguments and per-env state."""
        return f"{self.label}:{factor * self._t + offset}"


def space_env_fn(kind: str = "box", episode_len: int = 6, p_end: float = 0.15) -> EnvFn:
    return functools.partial(SpaceEnv, kind, episode_len, p_end)


class TaskEnv(gym.Env[np.ndarray, np.int64]):
    """Meta-RL style env: `sample_tasks(n)` draws tasks, `reset_task(task)` sets one;
    observations show the current goal."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-10.0, 10.0, (1,), np.float64)
        self.action_space = spaces.Discrete(2)
        self.task: dict[str, float] | None = None

    def sample_tasks(self, n: int) -> list[dict[str, float]]:
        return [{"goal": float(g)} for g in self.np_random.uniform(-5.0, 5.0, n)]

    def reset_task(self, task: dict[str, float]) -> str:
        self.task = task
        return f"goal={task['goal']:.3f}"

    def _obs(self) -> np.ndarray:
        return np.array([0.0 if self.task is None else self.task["goal"]])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return self._obs(), 0.0, False, False, {}


# --- registered envs, picklable under every start method ------------------------------


def make_registered(env_id: str, **kwargs: Any) -> gym.Env:
    """`gym.make`, from a module that registers the `pararl/...` ids when imported (a
    spawned worker unpickling this function imports it)."""
    return gym.make(env_id, **kwargs)


def registered_fn(env_id: str, **kwargs: Any) -> EnvFn:
    return functools.partial(make_registered, env_id, **kwargs)


def stepcost_fns(n: int, **kwargs: Any) -> list[EnvFn]:
    return [registered_fn("pararl/StepCost-v0", **kwargs) for _ in range(n)]


def make_quiet(parent: int, env_id: str, **kwargs: Any) -> gym.Env:
    """`make_registered`; in a process other than `parent` (a worker), first turns off
    the fault handler (pytest enables it; forked workers inherit it), so that a
    deliberate segfault dumps no traceback on the terminal."""
    if os.getpid() != parent:
        faulthandler.disable()
    return make_registered(env_id, **kwargs)


def with_faulty(n: int, index: int, **faulty: Any) -> list[EnvFn]:
    """`n` StepCost envs, except env `index`, a `pararl/Faulty-v0` with `faulty` args
    (`at` defaults to 1 here, whatever the registered default)."""
    faulty.setdefault("at", 1)
    fns = stepcost_fns(n)
    fns[index] = functools.partial(make_quiet, os.getpid(), "pararl/Faulty-v0", **faulty)
    return fns


# --- building vector envs (closed at teardown) --------------------------------------

BACKENDS = ("parallel", "serial")
START_METHODS = ("fork", "forkserver", "spawn")
VecFactory = Callable[..., BatchVectorEnv]


@pytest.fixture
def make_vec() -> Iterator[VecFactory]:
    """`make_vec(backend, env_fns, **kwargs)`; parallel envs default to 2 workers."""
    made: list[BatchVectorEnv] = []

    def make(backend: str, env_fns: Sequence[EnvFn], **kwargs: Any) -> BatchVectorEnv:
        env: BatchVectorEnv
        if backend == "parallel":
            kwargs.setdefault("num_workers", min(2, len(env_fns)))
            env = ParallelVectorEnv(env_fns, **kwargs)
        elif backend == "serial":
            env = SerialVectorEnv(env_fns, **kwargs)
        else:
            raise ValueError(backend)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


# --- comparing results ---------------------------------------------------------------


def assert_tree_equal(actual: Any, expected: Any, path: str = "") -> None:
    """Equal structure, keys (in order), dtypes, shapes and values, recursively."""
    where = path or "<root>"
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {type(actual)} is not a dict"
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_tree_equal(actual[key], expected[key], f"{path}/{key}")
    elif isinstance(expected, tuple):
        assert isinstance(actual, tuple), f"{where}: {type(actual)} is not a tuple"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_tree_equal(a, e, f"{path}/{i}")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: {type(actual)} is not an ndarray"
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        if expected.dtype == object:
            for i, (a, e) in enumerate(zip(actual.ravel(), expected.ravel(), strict=True)):
                assert_tree_equal(a, e, f"{path}[{i}]")
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=where)
    else:
        assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


# --- processes and shared memory -----------------------------------------------------


def descendants(pid: int | None = None) -> set[int]:
    """Live descendants of `pid` (default: this process)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {p.pid for p in children if pid_alive(p.pid)}


def mp_helper_pids() -> set[int]:
    """multiprocessing's own long-lived helpers (forkserver, resource tracker)."""
    from multiprocessing import forkserver, resource_tracker

    pids = {
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    }
    return {pid for pid in pids if pid is not None}


@pytest.fixture(autouse=True)
def _collect_only_the_tests_garbage() -> Iterator[None]:
    """What exists when a test starts is frozen (`gc.freeze`) until it ends: a
    `gc.collect()` in the test (a half-built or dropped env's workers stop in its
    `__del__`) then walks only the objects made since, not the whole heap of the
    suite's process (torch and everything else imported: ~1 s a collection there).
    Frozen objects are never garbage to a collection, and the test's are not frozen."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@pytest.fixture(autouse=True)
def _no_stray_processes() -> Iterator[None]:
    """Every test must leave no child process behind (besides mp's helpers)."""
    before = descendants()
    yield
    deadline = time.monotonic() + 2.0
    while True:
        stray = descendants() - before - mp_helper_pids()
        if not stray or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    details = []
    for pid in stray:
        try:
            details.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())[:120]}")
        except psutil.NoSuchProcess:
            continue
    assert not details, f"processes left behind: {details}"


@pytest.fixture
def shm_guard() -> Iterator[None]:
    """The test must not add entries to /dev/shm (entries that existed are ignored)."""
    before = shm_entries()
    yield
    leaked = new_shm_entries(before)
    assert not leaked, f"new /dev/shm entries: {sorted(leaked)}"
