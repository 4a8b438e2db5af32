"""`python -m benchmarks vector`: env-stepping throughput of `ParallelVectorEnv`
against Gymnasium's and SB3's vector envs and one env's raw rate, interleaved blocks.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import gymnasium as gym

from benchmarks.lib import harness as h
from benchmarks.lib import stepping
from benchmarks.lib.figures import Panel
from pararl.errors import UsageError
from pararl.mp.topology import physical_cores


@dataclass(frozen=True)
class Config(h.Options):
    """Vector-env stepping throughput: pararl against Gymnasium, SB3 and one env.
    --quick: CartPole + StepCost, 1 and 16 envs/worker, 2 short repeats (< 1 min)."""

    envs: tuple[str, ...] = ("CartPole-v1", "HalfCheetah-v5", "pararl/StepCost-v0")
    """Gymnasium env ids; one whose simulator is missing (MuJoCo) is skipped with a note."""
    envs_per_worker: tuple[int, ...] = (1, 4, 16, 64, 256, 512)
    """Sweep of envs per worker; total envs = workers × envs per worker."""
    workers: int | None = None
    """pararl worker processes; default: the physical cores available to this process."""
    backends: tuple[stepping.Backend, ...] = stepping.BACKENDS
    """Backends to time; single = one env in a plain loop, the reference rate; loops =
    one such loop per worker, all at once in their own processes (what the cores give)."""
    repeats: int = 3
    """Timed blocks per backend and case, interleaved across backends."""
    block_s: float = 0.75
    """Target seconds per timed block (step counts come from a calibration run)."""
    warmup_iters: int = 10
    """Untimed vector steps after reset, before calibration."""
    step_cost_us: float = 20.0
    """pararl/StepCost-v0: base CPU cost of one step, in microseconds."""
    tail_alpha: float = 1.5
    """pararl/StepCost-v0: Pareto shape of the extra cost (> 1, smaller = heavier; 0: off)."""
    timeout_s: float = 1e-3
    """Window of the pararl timeout mode, recv(timeout=...), in seconds."""
    max_process_per_env: int = 32
    """Skip Async/SubprocVecEnv (one process per env) when total envs exceed this."""
    context: Literal["fork", "forkserver", "spawn"] | None = None
    """Start method of every multi-process backend; default: the platform's."""
    autoreset_mode: Literal["SameStep", "NextStep"] = "SameStep"
    """Vector autoreset; SameStep counts only real transitions, like SB3 and the loop."""
    seed: int = 0
    """Seed for env resets and the pre-drawn random actions."""


QUICK = {
    "envs": ("CartPole-v1", "pararl/StepCost-v0"),
    "envs_per_worker": (1, 16),
    "repeats": 2,
    "block_s": 0.12,
    "warmup_iters": 3,
}


@dataclass
class Cell(stepping.Cell):
    """One backend at one point of the sweep; its rate in env steps/s."""

    vs_best_async: float | None = None
    efficiency: float | None = None  # ÷ (workers × the same case's single-env rate)
    of_loops: float | None = None  # ÷ the same case's parallel loops


@dataclass
class EnvResult:
    env_id: str
    env_kwargs: dict[str, float]
    workers: int
    skipped: str | None = None
    cells: list[Cell] = field(default_factory=list)
    best_async: tuple[float, int] | None = None  # (median steps/s, envs per worker)
    single_rate: float | None = None  # median over the cases' single-env medians

    def cell(self, envs_per_worker: int, backend: str) -> Cell | None:
        found = (
            c for c in self.cells if (c.envs_per_worker, c.backend) == (envs_per_worker, backend)
        )
        return next(found, None)


def resolve(config: Config) -> Config:
    config = h.apply_quick(config, QUICK)
    config = replace(config, envs_per_worker=tuple(sorted(set(config.envs_per_worker))))
    h.require(
        config,
        ">= 0: envs backends warmup_iters step_cost_us max_process_per_env",
        ">= 1: envs_per_worker workers repeats",
        "> 0: block_s timeout_s",
    )
    h.check(
        [
            (config.tail_alpha != 0 and not config.tail_alpha > 1, "--tail-alpha must be 0 or > 1"),
            (
                config.context not in (None, *mp.get_all_start_methods()),
                f"--context {config.context} is not available here",
            ),
        ]
    )
    return config


def env_kwargs(env_id: str, config: Config) -> dict[str, float]:
    if env_id.split("/")[-1].startswith("StepCost"):
        return {"cost_us": config.step_cost_us, "tail_alpha": config.tail_alpha}
    return {}


def probe_env(env_id: str, kwargs: dict[str, float]) -> str | None:
    """None if the env can be built; why not if its simulator is missing. An id that
    does not exist is the user's mistake: UsageError."""
    try:
        stepping.make_env(env_id, kwargs).close()
    except gym.error.DependencyNotInstalled as exc:
        return f"its dependencies are not installed ({exc})"
    except ImportError as exc:
        return f"cannot import {exc.name or 'a dependency'} ({exc}); pip install 'pararl[bench]'"
    except gym.error.Error as exc:
        raise UsageError(f"--envs: cannot make '{env_id}': {exc}") from exc
    return None


def measure_case(case: stepping.Case, config: Config) -> list[Cell]:
    where = f"{case.env_id} {case.envs_per_worker} envs/worker × {case.workers}"
    label = functools.partial(stepping.label, timeout_s=config.timeout_s)
    cells: dict[str, Cell] = {
        b: Cell(case.workers, case.envs_per_worker, case.num_envs, b, label(b), "ok")
        for b in config.backends
    }

    def failed(name: str, exc: Exception) -> None:
        h.progress(f"{where}: {name} failed: {h.failure(exc)}")
        cells[name].status, cells[name].note = "failed", h.failure(exc)

    before = {p.pid for p in mp.active_children()}
    closers: list[Callable[[], None]] = []
    runners: dict[str, stepping.Runner] = {}
    shared: dict[str, Any] = {}  # the pararl modes' one ParallelVectorEnv
    start = time.perf_counter()
    try:
        h.progress(f"{where}: starting backends ...")
        for name in config.backends:
            if name in stepping.PROCESS_PER_ENV and case.num_envs > config.max_process_per_env:
                cells[name].status, cells[name].note = "skipped", f"{case.num_envs} processes"
                continue
            try:
                runner = stepping.open_backend(name, case, closers, shared)
                runner.reset()
                runner.run(config.warmup_iters * runner.unit)
                cells[name].steps_per_block = stepping.calibrate(runner, config.block_s)
                runners[name] = runner
            except Exception as exc:
                failed(name, exc)

        def block(name: str) -> float:
            elapsed, done = h.timed(
                functools.partial(runners[name].run, cells[name].steps_per_block)
            )
            return done / elapsed

        tasks = {n: functools.partial(block, n) for n in runners}
        for done, rates in h.interleaved(tasks, config.repeats, failed).items():
            if cells[done].status == "ok":
                cells[done].rate = h.summarize(rates)
    finally:
        for close in reversed(closers):
            try:
                close()
            except Exception as exc:  # a dead worker must not stop the rest
                h.progress(f"{where}: close failed: {h.failure(exc)}")
        for proc in mp.active_children():  # last resort: an anchor that half-closed
            if proc.pid not in before:
                proc.kill()
                proc.join(1.0)
    h.progress(f"{where}: done in {time.perf_counter() - start:.1f} s")
    return list(cells.values())


def derive(result: EnvResult) -> None:
    """Ratios to AsyncVectorEnv's best setting, efficiencies (against the single-env
    rate of the same case: measured interleaved with it, on the same machine)."""
    rates = [(c.rate.median, c) for c in result.cells if c.rate]
    asyncs = [(rate, c.envs_per_worker) for rate, c in rates if c.backend == "gym_async"]
    result.best_async = max(asyncs) if asyncs else None
    singles = [rate for rate, c in rates if c.backend == "single"]
    result.single_rate = statistics.median(singles) if singles else None
    for c in result.cells:
        single, loops = (result.cell(c.envs_per_worker, b) for b in ("single", "loops"))
        one = h.med(single.rate) if single else None
        c.vs_best_async = h.ratio(c.rate, result.best_async[0] if result.best_async else None)
        c.efficiency = h.ratio(c.rate, one and result.workers * one)
        c.of_loops = h.ratio(c.rate, loops.rate if loops else None)


def measure(config: Config, meta: h.Metadata) -> list[EnvResult]:
    workers = config.workers or physical_cores()
    meta.params["workers_resolved"] = workers
    kwargs = {env_id: env_kwargs(env_id, config) for env_id in config.envs}
    # Every env is built once up front: a typo fails before minutes of measuring.
    results = [EnvResult(e, kwargs[e], workers, probe_env(e, kwargs[e])) for e in config.envs]
    for result in results:
        if result.skipped:
            h.progress(f"{result.env_id}: skipped: {result.skipped}")
            continue
        run = (config.context, config.autoreset_mode, config.timeout_s, config.seed)
        for epw in config.envs_per_worker:
            case = stepping.Case(result.env_id, result.env_kwargs, workers, epw, *run)
            result.cells += measure_case(case, config)
        derive(result)
    return results


CELL_COLUMNS: list[h.Col[Cell]] = [
    h.Col("envs/worker", lambda c: c.envs_per_worker),
    h.Col("envs", lambda c: c.num_envs),
    h.Col("backend", lambda c: c.label, "l"),
    h.Col(
        "steps/s (median)",
        lambda c: h.fmt_rate(c.rate.median) if c.rate else f"{c.status} ({c.note})",
    ),
    h.Col("min", lambda c: h.fmt_rate(c.rate.min if c.rate else None)),
    h.Col("max", lambda c: h.fmt_rate(c.rate.max if c.rate else None)),
    h.Col("vs best Async", lambda c: h.fmt_ratio(c.vs_best_async)),
    h.Col("efficiency", lambda c: h.fmt_pct(c.efficiency)),
    h.Col("of loops", lambda c: h.fmt_pct(c.of_loops)),
]


def env_block(r: EnvResult) -> str:
    title = f"### {r.env_id}"
    if r.env_kwargs:
        title += " (" + ", ".join(f"{k}={v}" for k, v in r.env_kwargs.items()) + ")"
    if r.skipped:
        return f"{title}\n\nskipped: {r.skipped}"
    best = "–" if r.best_async is None else f"{h.fmt_rate(r.best_async[0])} steps/s at "
    best += "" if r.best_async is None else f"{r.best_async[1]} envs/worker"
    notes = (
        f"{r.workers} workers. Best AsyncVectorEnv: {best}. Efficiency = steps/s ÷ "
        f"({r.workers} × the single-env rate of the same row group). Of loops = steps/s ÷ "
        f"the rate of {r.workers} single-env loops run at once in their own processes, "
        "same row group: what the cores gave the reference workload then."
    )
    return f"{title}\n\n{notes}\n\n{h.table(CELL_COLUMNS, r.cells)}"


def key_ratios(results: list[EnvResult]) -> str:
    """Per env: best pararl mode vs best Async, its efficiency and share of the loops."""
    parts = []
    for r in results:
        mine = [c for c in r.cells if c.backend in stepping.PARARL and c.rate]
        if not mine:
            continue
        best = max(mine, key=lambda c: c.rate.median if c.rate else 0.0)
        assert best.rate is not None
        vs = "no Async measured" if r.best_async is None else f"{best.vs_best_async:.2f}× best "
        vs += "" if r.best_async is None else "AsyncVectorEnv"
        loops = r.cell(best.envs_per_worker, "loops")
        ceiling = ""
        if best.of_loops is not None and loops is not None:
            ceiling = (
                f" ({h.fmt_pct(best.of_loops)} of {r.workers} parallel loops, which reached "
                f"{h.fmt_pct(loops.efficiency)} of {r.workers} × single)"
            )
        parts.append(
            f"**{r.env_id}**: best pararl {h.fmt_rate(best.rate.median)} steps/s ({best.label}, "
            f"{best.envs_per_worker} envs/worker) = {vs}, efficiency "
            f"{h.fmt_pct(best.efficiency)}{ceiling}"
        )
    return "; ".join(parts) or "no pararl results"


def panel(r: EnvResult, timeout_s: float) -> Panel:
    """Dashed: workers × the single-env rate."""
    line = (r.workers * r.single_rate, f"{r.workers} × single env") if r.single_rate else None
    label = functools.partial(stepping.label, timeout_s=timeout_s)
    return stepping.panel(r.env_id, r.cells, label, "env steps / s", line)


def report(results: list[EnvResult], meta: h.Metadata) -> h.Report:
    timeout_s = meta.params["timeout_s"]
    return h.Report(
        f"Vector env stepping throughput (`{h.PROG} vector`)",
        key_ratios(results),
        [env_block(r) for r in results],
        [panel(r, timeout_s) for r in results if r.cells],
        "steps/s against envs per worker",
        legend_below=True,
    )
