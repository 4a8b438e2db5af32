"""The stepping loops `vector` and `atari` time, one per backend: `unit`, `reset()`,
`run(steps)`, `close()`; actions drawn before timing, so sampling costs no backend. And
what both sweeps share: a cell of the sweep, a block's calibration, the figure's panel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import multiprocessing as mp
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Literal, Protocol, get_args

import gymnasium as gym
import numpy as np

import pararl.envs  # noqa: F401  (registers pararl/... ids for make_env)
from benchmarks.lib.figures import Panel, Series
from benchmarks.lib.harness import Summary, timed
from pararl.mp.procs import ProcessGroup

Backend = Literal[
    "single",
    "loops",
    "gym_sync",
    "gym_async",
    "sb3_subproc",
    "pararl_step",
    "pararl_min_envs",
    "pararl_timeout",
]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
PROCESS_PER_ENV = frozenset({"gym_async", "sb3_subproc"})  # cost grows with total envs
PARARL = ("pararl_step", "pararl_min_envs", "pararl_timeout")
ACTION_POOL = 64  # distinct action batches, cycled
LOOP_TIMEOUT_S = 300.0  # a timed block takes about a second; this is a hang


def label(name: str, timeout_s: float) -> str:
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
class Case:
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
    """Module level, so that spawn/forkserver workers can unpickle the factory."""
    return gym.make(env_id, **env_kwargs)


def actions(space: gym.Space, batch: int | None, seed: int) -> np.ndarray:
    """`ACTION_POOL` random actions (or batches of `batch` actions), stacked."""
    space.seed(seed)
    drawn = np.stack([np.asarray(space.sample()) for _ in range(ACTION_POOL * (batch or 1))])
    return drawn if batch is None else drawn.reshape(ACTION_POOL, batch, *drawn.shape[1:])


class Runner(Protocol):
    unit: int

    def reset(self) -> None: ...
    def run(self, steps: int) -> int: ...


def calibrate(runner: Runner, block_s: float) -> int:
    """Steps (a multiple of the runner's unit) that take about `block_s`."""
    probe_s, steps = max(0.02, block_s / 5), runner.unit
    while True:
        elapsed, done = timed(functools.partial(runner.run, steps))
        if elapsed >= probe_s:
            break  # grow geometrically, capped so one noisy probe cannot jump to an hour
        steps = math.ceil(steps * min(8.0, max(2.0, 1.2 * probe_s / max(elapsed, 1e-6))))
    return max(1, math.ceil(done / elapsed * block_s / runner.unit)) * runner.unit


@dataclass
class Cell:
    """One backend at one point of a sweep."""

    workers: int
    envs_per_worker: int
    num_envs: int
    backend: str
    label: str
    status: str  # ok, skipped or failed
    note: str = ""
    steps_per_block: int = 0
    rate: Summary | None = None  # steps/s


def panel(
    title: str,
    cells: list[Any],
    label: Callable[[str], str],
    ylabel: str,
    line: tuple[float, str] | None = None,
) -> Panel:
    """Steps/s against envs per worker (log-log), one line per backend but the single
    env (bars: min–max); dashed: `line`, a rate and its label."""
    backends = dict.fromkeys(c.backend for c in cells if c.backend != "single")
    series = []
    for i, backend in enumerate(backends):
        pts = [(c.envs_per_worker, c.rate) for c in cells if c.backend == backend and c.rate]
        if pts:
            series.append(Series.of(label(backend), pts, color=f"C{i}"))
    sweep = sorted({c.envs_per_worker for c in cells})
    xlabel = f"envs per worker ({cells[0].workers} workers)"
    ticks = [(e, str(e)) for e in sweep]
    hlines: list[tuple[float, str, str | None]] = [(line[0], "--", line[1])] if line else []
    return Panel(title, series, xlabel, ylabel, ticks, logx=2, logy=True, hlines=hlines)


class Single:
    """One env in this process, reset on episode end: the reference step rate."""

    unit = 1

    def __init__(self, case: Case) -> None:
        self.env, self.seed = make_env(case.env_id, case.env_kwargs), case.seed
        self.actions = list(actions(self.env.action_space, None, case.seed))

    def reset(self) -> None:
        self.env.reset(seed=self.seed)

    def run(self, steps: int) -> int:
        env, acts, pool = self.env, self.actions, len(self.actions)
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(acts[i % pool])
            if terminated or truncated:
                env.reset()
        return steps


def _loop_child(conn: Connection, case: Case) -> None:
    """Serve ("reset", _) and ("run", steps) on one `Single` until ("close", _)."""
    runner = Single(case)
    try:
        conn.send((True, None))
        while (msg := conn.recv())[0] != "close":
            if msg[0] == "reset":
                runner.reset()
            conn.send((True, 0 if msg[0] == "reset" else runner.run(msg[1])))
    finally:
        runner.env.close()


class Loops:
    """The cores' own ceiling: one `Single` per worker in its own process, all run at
    once, one message each way per timed block."""

    def __init__(self, case: Case) -> None:
        self.unit = case.workers
        args = [(dataclasses.replace(case, seed=case.seed + i),) for i in range(case.workers)]
        with deferred_sigint():
            self.group = ProcessGroup(_loop_child, args, mp.get_context(case.context))
        try:
            self.group.await_ready(120.0)
        except BaseException:
            self.group.kill()
            raise

    def _all(self, command: str, value: int) -> int:
        for i in range(self.unit):
            self.group.send(i, (command, value))
        done = self.group.gather(range(self.unit), LOOP_TIMEOUT_S, "no reply in {timeout} s")
        return sum(done)

    def reset(self) -> None:
        self._all("reset", 0)

    def run(self, steps: int) -> int:
        return self._all("run", -(-steps // self.unit))


class VectorStep:
    """Full synchronous steps of any vector env with `step(actions)`."""

    def __init__(self, venv: Any, n: int, acts: np.ndarray, reset: Callable[[], Any]) -> None:
        self.venv, self.unit, self.actions, self.reset = venv, n, acts, reset

    def run(self, steps: int) -> int:
        iterations = -(-steps // self.unit)
        step, acts, pool = self.venv.step, self.actions, len(self.actions)
        for i in range(iterations):
            step(acts[i % pool])
        return iterations * self.unit


class Partial:
    """pararl's partial stepping: send to all, then recv (by `min_envs` or `timeout`)
    and send new actions to exactly the envs that came back. A block ends by draining
    the envs in flight (their steps count), so the next backend starts on an idle
    machine."""

    def __init__(self, venv: Any, acts: np.ndarray, seed: int, **recv: Any) -> None:
        self.venv, self.actions, self.seed, self.recv = venv, acts, seed, recv
        self.unit = venv.num_envs

    def reset(self) -> None:
        self.venv.reset(seed=self.seed)

    def run(self, steps: int) -> int:
        venv, acts, pool = self.venv, self.actions, len(self.actions)
        venv.send(acts[0])
        done, i = 0, 1
        while done < steps:
            ids = venv.recv(**self.recv)[5]
            done += len(ids)
            venv.send(acts[i % pool][: len(ids)], ids)  # rows of a random batch: random
            i += 1
        return done + len(venv.recv()[5])


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold Ctrl-C while anchors start their processes (children inherit the holding
    handler, so a later Ctrl-C does not kill each with a traceback), then raise it."""
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


def open_backend(
    name: str, case: Case, closers: list[Callable[[], None]], shared: dict[str, Any]
) -> Runner:
    """Backend `name` for `case`; what it holds is closed by `closers` (in reverse).
    The three pararl modes share one `ParallelVectorEnv` (`shared`): a block always
    ends with no env in flight, so each starts from the same state."""
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    fns: list[Callable[[], gym.Env]] = [
        functools.partial(make_env, case.env_id, case.env_kwargs)
    ] * case.num_envs
    n, seed, mode = case.num_envs, case.seed, case.autoreset_mode
    if name in ("single", "loops"):
        runner: Any = Single(case) if name == "single" else Loops(case)
        closers.append(runner.env.close if name == "single" else runner.group.close)
        return runner
    if name.startswith("pararl_"):
        if "pararl" not in shared:
            from pararl.vector import ParallelVectorEnv

            shared["pararl"] = ParallelVectorEnv(
                fns, num_workers=case.workers, context=case.context, autoreset_mode=mode
            )
            closers.append(shared["pararl"].close)
        venv = shared["pararl"]
        acts = actions(venv.single_action_space, n, seed)
        if name == "pararl_step":
            return VectorStep(venv, n, acts, functools.partial(venv.reset, seed=seed))
        if name == "pararl_min_envs":
            return Partial(venv, acts, seed, min_envs=case.envs_per_worker)
        return Partial(venv, acts, seed, timeout=case.timeout_s)
    if name == "gym_sync":
        venv = SyncVectorEnv(fns, autoreset_mode=mode)
    elif name == "gym_async":
        with deferred_sigint():
            venv = AsyncVectorEnv(
                fns, shared_memory=True, context=case.context, autoreset_mode=mode
            )
    else:
        from stable_baselines3.common.vec_env import SubprocVecEnv

        with deferred_sigint():  # SB3 picks forkserver by default: use the others' method
            venv = SubprocVecEnv(fns, start_method=case.context or mp.get_start_method())
        closers.append(venv.close)
        acts = actions(venv.action_space, n, seed)
        return VectorStep(venv, n, acts, lambda: (venv.seed(seed), venv.reset()))
    closers.append(venv.close)
    return VectorStep(
        venv, n, actions(venv.single_action_space, n, seed), lambda: venv.reset(seed=seed)
    )
