"""What `vector` and `atari` share: a sweep of (env, workers, envs per worker) cases,
each backend of a case in a driver process of its own (its process time is then the
caller's CPU alone, and its pipes' bytes are counted on the parent ends), stepping
with random actions drawn before timing, calibrated and timed in interleaved blocks;
the loops the drivers run, and the figure's panel.
"""

from __future__ import annotations

import functools
import math
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, Series
from pararl.mp.procs import ProcessGroup

SEED = 0  # of env resets and the pre-drawn random actions
ACTION_POOL = 64  # distinct action batches, cycled
START_TIMEOUT_S = 300.0  # building 16 Atari envs on 2 busy cores takes seconds, not minutes
REPLY_TIMEOUT_S = 300.0  # a block takes about a second; this is a hang
CLOSE_GRACE_S = 30.0


@dataclass(frozen=True)
class Case:
    """One point of a sweep: an env, a worker count and envs per worker."""

    env_id: str
    workers: int
    envs_per_worker: int
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 1e-3  # of `vector`'s pararl timeout mode

    @property
    def num_envs(self) -> int:
        return self.workers * self.envs_per_worker


def actions(space: gym.Space, batch: int | None) -> np.ndarray:
    """`ACTION_POOL` random actions (or batches of `batch` actions), stacked."""
    space.seed(SEED)
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
        elapsed, done = h.timed(functools.partial(runner.run, steps))
        if elapsed >= probe_s:
            break  # grow geometrically, capped so one noisy probe cannot jump to an hour
        steps = math.ceil(steps * min(8.0, max(2.0, 1.2 * probe_s / max(elapsed, 1e-6))))
    return max(1, math.ceil(done / elapsed * block_s / runner.unit)) * runner.unit


class Single:
    """One env in the driver, reset on episode end: the reference step rate."""

    unit = 1

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.actions = list(actions(env.action_space, None))

    def reset(self) -> None:
        self.env.reset(seed=SEED)

    def run(self, steps: int) -> int:
        env, acts, pool = self.env, self.actions, len(self.actions)
        for i in range(steps):
            _, _, terminated, truncated, _ = env.step(acts[i % pool])
            if terminated or truncated:
                env.reset()
        return steps


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

    def __init__(self, venv: Any, acts: np.ndarray, **recv: Any) -> None:
        self.venv, self.actions, self.recv, self.unit = venv, acts, recv, venv.num_envs

    def reset(self) -> None:
        self.venv.reset(seed=SEED)

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


class PipeBytes:
    """Bytes of the pickled messages through `conns` (parent ends), both ways.

    `Connection.send` pickles and hands the bytes to `_send_bytes`; `recv` takes them
    from `_recv_bytes` before unpickling. Wrapping these two on the instances counts
    every message's payload (the 4-byte length header aside) and nothing else."""

    def __init__(self, conns: Sequence[Connection]) -> None:
        self.total = 0
        for conn in conns:
            send, recv = conn._send_bytes, conn._recv_bytes  # type: ignore[attr-defined]
            conn._send_bytes = functools.partial(self._send, send)  # type: ignore[attr-defined]
            conn._recv_bytes = functools.partial(self._recv, recv)  # type: ignore[attr-defined]

    def _send(self, send: Callable[[Any], None], buf: Any) -> None:
        self.total += memoryview(buf).nbytes
        send(buf)

    def _recv(self, recv: Callable[..., Any], *args: Any) -> Any:
        buf = recv(*args)
        self.total += buf.getbuffer().nbytes
        return buf


# a backend's runner for a case, the counter on its pipes (None: no pipes), its close
Opened = tuple[Runner, PipeBytes | None, Callable[[], None]]


@dataclass
class Block:
    """One timed block: agent steps, wall seconds, CPU seconds of the calling thread
    and of the whole driver (which holds EnvPool's and ale-py's env threads too), and
    the pipe bytes both ways (None: the backend has no pipes)."""

    steps: int
    wall_s: float
    thread_cpu_s: float
    process_cpu_s: float
    pipe_bytes: int | None


def driver(conn: Connection, opener: Callable[..., Opened], name: str, case: Any,
           warmup: int) -> None:  # fmt: skip
    """A backend's process: build it (reply: None, or why it failed), then serve
    ("calibrate", block_s) -> steps per block and ("block", steps) -> `Block` until
    ("close", _). Runs under `pararl.mp.procs.ProcessGroup`."""
    try:
        runner, pipes, close = opener(name, case)
        runner.reset()
        runner.run(max(warmup, 1) * runner.unit)
    except Exception as exc:
        conn.send((True, h.failure(exc)))
        return
    try:
        conn.send((True, None))
        while (msg := conn.recv())[0] != "close":
            if msg[0] == "calibrate":
                conn.send((True, calibrate(runner, msg[1])))
                continue
            before = pipes.total if pipes else 0
            wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
            done = runner.run(msg[1])
            wall, thread = time.perf_counter() - wall, time.thread_time() - thread
            process = time.process_time() - process
            sent = pipes.total - before if pipes else None
            conn.send((True, Block(done, wall, thread, process, sent)))
    finally:
        close()


@dataclass
class Cell:
    """One backend at one point of a sweep; its rate in (agent) steps/s."""

    workers: int
    envs_per_worker: int
    num_envs: int
    backend: str
    label: str
    status: str = "ok"  # ok, skipped or failed
    note: str = ""
    steps_per_block: int = 0
    rate: h.Summary | None = None
    thread_cpu_us: float | None = None  # the driver's thread's CPU µs per step (median)
    process_cpu_us: float | None = None  # the driver's CPU µs per step (median)
    pipe_bytes: float | None = None  # pickled bytes both ways per step (median)


def measure_case(case: Any, cells: dict[str, Any], opener: Callable[..., Opened], warmup: int,
                 block_s: float, repeats: int) -> None:  # fmt: skip
    """Every backend of `cells` not skipped yet, each in its driver: built, warmed up,
    calibrated one at a time (calibration needs the cores), then timed in interleaved
    rounds, each starting one backend later; what it measured goes into its cell."""
    where = f"{case.env_id} {case.envs_per_worker} envs/worker × {case.workers}"
    names = [b for b, c in cells.items() if c.status == "ok"]
    if not names:
        return

    def failed(name: str, why: Exception | str) -> None:
        text = why if isinstance(why, str) else h.failure(why)
        h.progress(f"{where}: {name} failed: {text}")
        cells[name].status, cells[name].note = "failed", text

    h.progress(f"{where}: starting {len(names)} backends ...")
    args = [(opener, name, case, warmup) for name in names]
    group = ProcessGroup(driver, args, mp.get_context("fork"), "bench-driver", daemon=False)
    try:
        built = group.gather(range(len(names)), START_TIMEOUT_S, "not built in {timeout} s")
        live = {n: i for i, (n, why) in enumerate(zip(names, built, strict=True)) if why is None}
        for name, why in zip(names, built, strict=True):
            if why is not None:
                failed(name, why)
        for name, i in live.items():
            group.send(i, ("calibrate", block_s))
            cells[name].steps_per_block = group.gather([i], REPLY_TIMEOUT_S, "hangs")[0]
        blocks: dict[str, list[Block]] = {name: [] for name in live}

        def block(name: str) -> float:
            group.send(live[name], ("block", cells[name].steps_per_block))
            done: Block = group.gather([live[name]], REPLY_TIMEOUT_S, "hangs")[0]
            blocks[name].append(done)
            return done.steps / done.wall_s

        tasks = {name: functools.partial(block, name) for name in live}
        h.interleaved(tasks, repeats, failed, rotate=True)
    finally:
        group.close(CLOSE_GRACE_S)
    for name, done in blocks.items():
        cell = cells[name]
        if cell.status != "ok":
            continue
        cell.rate = h.summarize([b.steps / b.wall_s for b in done])
        cell.thread_cpu_us = statistics.median(1e6 * b.thread_cpu_s / b.steps for b in done)
        cell.process_cpu_us = statistics.median(1e6 * b.process_cpu_s / b.steps for b in done)
        counted = [b.pipe_bytes / b.steps for b in done if b.pipe_bytes is not None]
        cell.pipe_bytes = statistics.median(counted) if counted else None


def panel(title: str, cells: list[Any], label: Callable[[str], str], ylabel: str,
          line: tuple[float, str] | None = None) -> Panel:  # fmt: skip
    """Steps/s against envs per worker (log-log), one line per backend but the single
    env (bars: min–max); dashed: `line`, a rate and its label."""
    backends = dict.fromkeys(c.backend for c in cells if c.backend != "single")
    series = []
    for i, backend in enumerate(backends):
        pts = [(c.envs_per_worker, c.rate) for c in cells if c.backend == backend and c.rate]
        if pts:
            series.append(Series.of(label(backend), pts, color=f"C{i}"))
    ticks = [(e, str(e)) for e in sorted({c.envs_per_worker for c in cells})]
    hlines: list[tuple[float, str, str | None]] = [(line[0], "--", line[1])] if line else []
    xlabel = f"envs per worker ({cells[0].workers} workers)"
    return Panel(title, series, xlabel, ylabel, ticks, logx=2, logy=True, hlines=hlines)
