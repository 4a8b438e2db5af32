"""The stepping loops `pararl bench vector` times: one per backend, all with the
same small interface (`reset`, `run(steps) -> steps done`, `close`).

Actions are drawn once, before timing, from the action space: sampling in the
hot loop would add the same cost to every backend and shrink the differences we
want to see.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing as mp
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

import gymnasium as gym
import numpy as np

import pararl.envs  # noqa: F401  (registers pararl/... ids for make_env)

BackendName = Literal[
    "single",
    "loops",
    "gym_sync",
    "gym_async",
    "sb3_subproc",
    "pararl_step",
    "pararl_min_envs",
    "pararl_timeout",
]
ALL_BACKENDS: tuple[BackendName, ...] = get_args(BackendName)
# Anchors that start one process per env: their cost grows with the total env count.
PROCESS_PER_ENV: frozenset[str] = frozenset({"gym_async", "sb3_subproc"})
ACTION_POOL = 64  # distinct action batches, cycled


def backend_label(name: str, timeout_s: float) -> str:
    return {
        "single": "single env, plain loop",
        "loops": "one plain loop per worker, no IPC",
        "gym_sync": "gymnasium SyncVectorEnv",
        "gym_async": "gymnasium AsyncVectorEnv (shm)",
        "sb3_subproc": "SB3 SubprocVecEnv",
        "pararl_step": "pararl step",
        "pararl_min_envs": "pararl recv(min_envs=epw)",
        "pararl_timeout": f"pararl recv(timeout={timeout_s * 1e3:g} ms)",
    }[name]


@dataclass(frozen=True)
class EnvCase:
    """One point of the sweep: an env, a worker count and envs per worker."""

    env_id: str
    env_kwargs: dict[str, Any]
    workers: int
    envs_per_worker: int
    context: str | None
    autoreset_mode: str
    timeout_s: float
    seed: int

    @property
    def num_envs(self) -> int:
        return self.workers * self.envs_per_worker


def make_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """Module level, so that spawn/forkserver workers can unpickle the factory and
    import this module, which registers pararl's own env ids."""
    return gym.make(env_id, **env_kwargs)


def env_factories(case: EnvCase) -> list[Callable[[], gym.Env]]:
    fn = functools.partial(make_env, case.env_id, case.env_kwargs)
    return [fn] * case.num_envs


def action_pool(space: gym.Space, batch: int | None, seed: int) -> np.ndarray:
    """`ACTION_POOL` random actions (or batches of `batch` actions), stacked."""
    space.seed(seed)
    count = ACTION_POOL * (batch or 1)
    actions = np.stack([np.asarray(space.sample()) for _ in range(count)])
    if batch is None:
        return actions
    return actions.reshape(ACTION_POOL, batch, *actions.shape[1:])


class Runner(Protocol):
    unit: int  # env steps one iteration of `run` makes (a full vector step)

    def reset(self) -> None: ...
    def run(self, steps: int) -> int: ...


class SingleEnvRunner:
    """One env in this process: the raw step rate, the reference for efficiency.
    Resets inside the loop on episode end, as an agent's own loop would."""

    unit = 1

    def __init__(self, case: EnvCase) -> None:
        self.env = make_env(case.env_id, case.env_kwargs)
        self.seed = case.seed
        self.actions = list(action_pool(self.env.action_space, None, case.seed))

    def reset(self) -> None:
        self.env.reset(seed=self.seed)

    def run(self, steps: int) -> int:
        env, actions, pool = self.env, self.actions, len(self.actions)
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(actions[i % pool])
            if terminated or truncated:
                env.reset()
        return steps


class VectorStepRunner:
    """Full synchronous steps of any vector env with a `step(actions)` call."""

    def __init__(
        self, venv: Any, num_envs: int, actions: np.ndarray, reset: Callable[[], Any]
    ) -> None:
        self.venv, self.unit, self.actions, self._reset = venv, num_envs, actions, reset

    def reset(self) -> None:
        self._reset()

    def run(self, steps: int) -> int:
        iterations = -(-steps // self.unit)
        step, actions, pool = self.venv.step, self.actions, len(self.actions)
        for i in range(iterations):
            step(actions[i % pool])
        return iterations * self.unit


class PartialRunner:
    """pararl's partial stepping: send to all, then loop recv (by `min_envs` or
    `timeout`) and send new actions to exactly the envs that came back.

    Each block ends by draining the envs still in flight, so the next backend in
    the rotation starts on an idle machine; their steps count, they were paid for.
    """

    def __init__(
        self,
        venv: Any,
        actions: np.ndarray,
        seed: int,
        min_envs: int | None = None,
        timeout: float | None = None,
    ) -> None:
        self.venv, self.actions, self.seed = venv, actions, seed
        self.unit = venv.num_envs
        self.min_envs, self.timeout = min_envs, timeout

    def reset(self) -> None:
        self.venv.reset(seed=self.seed)

    def run(self, steps: int) -> int:
        venv, actions, pool = self.venv, self.actions, len(self.actions)
        min_envs, timeout = self.min_envs, self.timeout
        venv.send(actions[0])
        done, i = 0, 1
        while done < steps:
            ids = venv.recv(min_envs=min_envs, timeout=timeout)[5]
            done += len(ids)
            # Any rows of a random batch are random actions: a slice avoids a copy.
            venv.send(actions[i % pool][: len(ids)], ids)
            i += 1
        return done + len(venv.recv()[5])


@dataclass
class OpenBackends:
    """The runners of one case and how to close what they hold (in reverse)."""

    runners: dict[str, Runner] = field(default_factory=dict)
    closers: list[Callable[[], None]] = field(default_factory=list)
    pararl: Any = None  # the ParallelVectorEnv, once a pararl mode asked for it

    def close(self) -> None:
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):  # a dead worker must not stop the rest
                close()
        self.closers.clear()


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold Ctrl-C while anchors start their processes, then raise it.

    Children forked meanwhile inherit the holding handler, so a later Ctrl-C does
    not kill each of them with its own traceback; the parent owns their shutdown.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _vector_backend(name: str, case: EnvCase, into: OpenBackends) -> Runner:
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    fns, n = env_factories(case), case.num_envs
    venv: Any
    if name == "gym_sync":
        venv = SyncVectorEnv(fns, autoreset_mode=case.autoreset_mode)
    elif name == "gym_async":
        with deferred_sigint():
            venv = AsyncVectorEnv(
                fns, shared_memory=True, context=case.context, autoreset_mode=case.autoreset_mode
            )
    else:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        # SB3 picks forkserver by default; the same start method as the other
        # backends keeps start-up costs out of the comparison.
        with deferred_sigint():
            venv = SubprocVecEnv(fns, start_method=case.context or mp.get_start_method())
    into.closers.append(venv.close)
    actions = action_pool(
        venv.single_action_space if name != "sb3_subproc" else venv.action_space, n, case.seed
    )
    if name == "sb3_subproc":

        def reset() -> Any:
            venv.seed(case.seed)
            return venv.reset()
    else:
        reset = functools.partial(venv.reset, seed=case.seed)
    return VectorStepRunner(venv, n, actions, reset)


def _pararl_env(case: EnvCase, into: OpenBackends) -> Any:
    """The case's one `ParallelVectorEnv`, shared by the three pararl modes (a
    block always ends with no env in flight, so each mode starts from the same
    state, and the case needs a third of the processes)."""
    if into.pararl is None:
        from pararl.vector import ParallelVectorEnv

        into.pararl = ParallelVectorEnv(
            env_factories(case),
            num_workers=case.workers,
            context=case.context,
            autoreset_mode=case.autoreset_mode,
        )
        into.closers.append(into.pararl.close)
    return into.pararl


def open_backend(name: str, case: EnvCase, into: OpenBackends) -> None:
    """Create backend `name` for `case` and add its runner to `into`."""
    runner: Runner
    if name == "single":
        single = SingleEnvRunner(case)
        into.closers.append(single.env.close)
        runner = single
    elif name == "loops":
        from pararl.bench.vector_ceiling import LoopsRunner

        loops = LoopsRunner(case)
        into.closers.append(loops.close)
        runner = loops
    elif name.startswith("pararl_"):
        venv = _pararl_env(case, into)
        actions = action_pool(venv.single_action_space, case.num_envs, case.seed)
        if name == "pararl_step":
            runner = VectorStepRunner(
                venv, case.num_envs, actions, functools.partial(venv.reset, seed=case.seed)
            )
        elif name == "pararl_min_envs":
            runner = PartialRunner(venv, actions, case.seed, min_envs=case.envs_per_worker)
        else:
            runner = PartialRunner(venv, actions, case.seed, timeout=case.timeout_s)
    else:
        runner = _vector_backend(name, case, into)
    into.runners[name] = runner
