"""`python -m benchmarks vector`: env-stepping throughput of `ParallelVectorEnv`
against Gymnasium's and SB3's vector envs and one env's raw rate, interleaved blocks.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

import gymnasium as gym

import pararl.envs  # noqa: F401  (registers pararl/... ids for make_env)
from benchmarks.lib import harness as h
from benchmarks.lib import stepping
from benchmarks.lib.stepping import SEED, Case, Partial, Single, VectorStep, actions
from pararl.errors import UsageError
from pararl.mp.procs import ProcessGroup
from pararl.mp.topology import physical_cores

Backend = Literal["single", "loops", "gym_sync", "gym_async", "sb3_subproc", "pararl_step",
                  "pararl_min_envs", "pararl_timeout"]  # fmt: skip
BACKENDS: tuple[Backend, ...] = get_args(Backend)
PROCESS_PER_ENV = frozenset({"gym_async", "sb3_subproc"})  # cost grows with total envs
PARARL = ("pararl_step", "pararl_min_envs", "pararl_timeout")
LOOP_TIMEOUT_S = 300.0  # a timed block takes about a second; this is a hang


@dataclass(frozen=True)
class Config(h.Options):
    """Vector-env stepping throughput: pararl against Gymnasium, SB3 and one env.
    --quick: CartPole + StepCost, 1 and 16 envs/worker, 2 short repeats (< 1 min)."""

    envs: tuple[str, ...] = ("CartPole-v1", "HalfCheetah-v5", "pararl/StepCost-v0")  # Env ids.
    envs_per_worker: tuple[int, ...] = (1, 4, 16, 64, 256, 512)  # Sweep of envs per worker.
    workers: int | None = None  # pararl worker processes (default: the physical cores here).
    backends: tuple[Backend, ...] = BACKENDS  # single: the reference; loops: one a worker.
    repeats: int = 3  # Timed blocks per backend and case, interleaved across backends.
    block_s: float = 0.75  # Target seconds per timed block (its steps from a calibration).
    tail_alpha: float = 1.5  # StepCost-v0's Pareto tail shape (> 1, smaller: heavier; 0: off).
    timeout_s: float = 1e-3  # Window of the pararl timeout mode, recv(timeout=...), in seconds.
    max_process_per_env: int = 32  # Skip Async/SubprocVecEnv (a process an env) above this.


QUICK = {"envs": ("CartPole-v1", "pararl/StepCost-v0"), "envs_per_worker": (1, 16),
         "repeats": 2, "block_s": 0.12}  # fmt: skip
WARMUP = 10  # untimed vector steps after reset, before calibration


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    c = replace(c, envs_per_worker=tuple(sorted(set(c.envs_per_worker))))
    h.require(c, ">= 0: envs backends max_process_per_env",
              ">= 1: envs_per_worker workers repeats", "> 0: block_s timeout_s")  # fmt: skip
    h.check([(c.tail_alpha != 0 and not c.tail_alpha > 1, "--tail-alpha must be 0 or > 1")])
    return c


def label(name: str, timeout_s: float = 1e-3) -> str:
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


def make_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """Module level, so that spawn/forkserver workers can unpickle the factory."""
    return gym.make(env_id, **env_kwargs)


class Loops:
    """The cores' own ceiling: one `Single` per worker, each in a driver of its own
    (`stepping.driver`), all run at once, one message each way a block."""

    def __init__(self, case: Case) -> None:
        self.unit = case.workers
        args = [(open_backend, "single", case, 0)] * case.workers
        self.group = ProcessGroup(stepping.driver, args, mp.get_context())
        try:
            why = [w for w in self.group.gather(range(self.unit), 120.0, "not built") if w]
            if why:
                raise RuntimeError(why[0])
        except BaseException:
            self.group.kill()
            raise

    def reset(self) -> None:  # each driver reset its env when it built it
        pass

    def run(self, steps: int) -> int:
        for i in range(self.unit):
            self.group.send(i, ("block", -(-steps // self.unit)))
        blocks = self.group.gather(range(self.unit), LOOP_TIMEOUT_S, "no reply in {timeout} s")
        return sum(b.steps for b in blocks)


def open_backend(name: str, case: Case) -> stepping.Opened:
    """Backend `name` for `case`, in its driver (`stepping.driver`)."""
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    from pararl.vector import ParallelVectorEnv

    n = case.num_envs
    fns: list[Callable[[], gym.Env]] = [
        functools.partial(make_env, case.env_id, case.env_kwargs)
    ] * n
    if name in ("single", "loops"):
        runner: Any = Single(fns[0]()) if name == "single" else Loops(case)
        return runner, None, runner.env.close if name == "single" else runner.group.close
    if name.startswith("pararl_"):
        venv: Any = ParallelVectorEnv(fns, num_workers=case.workers, autoreset_mode="SameStep")
        acts = actions(venv.single_action_space, n)
        if name == "pararl_step":
            runner = VectorStep(venv, n, acts, functools.partial(venv.reset, seed=SEED))
        elif name == "pararl_min_envs":
            runner = Partial(venv, acts, min_envs=case.envs_per_worker)
        else:
            runner = Partial(venv, acts, timeout=case.timeout_s)
        return runner, None, venv.close
    if name == "sb3_subproc":
        from stable_baselines3.common.vec_env import SubprocVecEnv

        venv = SubprocVecEnv(fns, start_method=mp.get_start_method())
        acts = actions(venv.action_space, n)
        return VectorStep(venv, n, acts, lambda: (venv.seed(SEED), venv.reset())), None, venv.close
    if name == "gym_sync":
        venv = SyncVectorEnv(fns, autoreset_mode="SameStep")
    else:
        venv = AsyncVectorEnv(fns, shared_memory=True, autoreset_mode="SameStep")
    acts = actions(venv.single_action_space, n)
    return VectorStep(venv, n, acts, functools.partial(venv.reset, seed=SEED)), None, venv.close


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


def probe_env(env_id: str, kwargs: dict[str, float]) -> str | None:
    """None if the env can be built; why not if its simulator is missing. An id that
    does not exist is the user's mistake: UsageError."""
    try:
        make_env(env_id, kwargs).close()
    except gym.error.DependencyNotInstalled as exc:
        return f"its dependencies are not installed ({exc})"
    except ImportError as exc:
        return f"cannot import {exc.name or 'a dependency'} ({exc}); pip install 'pararl[bench]'"
    except gym.error.Error as exc:
        raise UsageError(f"--envs: cannot make '{env_id}': {exc}") from exc
    return None


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


def measure(c: Config, meta: h.Metadata) -> list[EnvResult]:
    workers = c.workers or physical_cores()
    meta.params["workers_resolved"] = workers
    results = []
    for env_id in c.envs:  # every env built once up front: a typo fails before minutes pass
        kwargs = {}
        if env_id.split("/")[-1].startswith("StepCost"):
            kwargs = {"cost_us": 20.0, "tail_alpha": c.tail_alpha}
        results.append(EnvResult(env_id, kwargs, workers, probe_env(env_id, kwargs)))
    for result in results:
        if result.skipped:
            h.progress(f"{result.env_id}: skipped: {result.skipped}")
            continue
        for epw in c.envs_per_worker:
            case = Case(result.env_id, workers, epw, result.env_kwargs, c.timeout_s)
            cells: dict[str, Cell] = {b: Cell(workers, epw, case.num_envs, b, label(b, c.timeout_s))
                     for b in c.backends}  # fmt: skip
            for name in PROCESS_PER_ENV & cells.keys():
                if case.num_envs > c.max_process_per_env:
                    cells[name].status, cells[name].note = "skipped", f"{case.num_envs} processes"
            stepping.measure_case(case, cells, open_backend, WARMUP, c.block_s, c.repeats)
            result.cells += cells.values()
        derive(result)
    return results


CELL_COLUMNS: list[h.Col[Cell]] = [
    h.Col("envs/worker", lambda c: c.envs_per_worker),
    h.Col("envs", lambda c: c.num_envs),
    h.Col("backend", lambda c: c.label, "l"),
    h.Col("steps/s (median)", lambda c: h.fmt_rate(h.med(c.rate)) if c.rate
          else f"{c.status} ({c.note})"),
    h.Col("min", lambda c: h.fmt_rate(c.rate.min if c.rate else None)),
    h.Col("max", lambda c: h.fmt_rate(c.rate.max if c.rate else None)),
    h.Col("vs best Async", lambda c: h.fmt_ratio(c.vs_best_async)),
    h.Col("efficiency", lambda c: h.fmt_pct(c.efficiency)),
    h.Col("of loops", lambda c: h.fmt_pct(c.of_loops)),
]  # fmt: skip


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
        mine = [c for c in r.cells if c.backend in PARARL and c.rate]
        if not mine:
            continue
        best = max(mine, key=lambda c: h.med(c.rate) or 0.0)
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
            f"**{r.env_id}**: best pararl {h.fmt_rate(h.med(best.rate))} steps/s ({best.label}, "
            f"{best.envs_per_worker} envs/worker) = {vs}, efficiency "
            f"{h.fmt_pct(best.efficiency)}{ceiling}"
        )
    return "; ".join(parts) or "no pararl results"


def report(results: list[EnvResult], meta: h.Metadata) -> h.Report:
    names = functools.partial(label, timeout_s=meta.params["timeout_s"])
    panels = [
        stepping.panel(r.env_id, r.cells, names, "env steps / s", (
            r.workers * r.single_rate, f"{r.workers} × single env") if r.single_rate else None)
        for r in results if r.cells
    ]  # fmt: skip
    return h.Report(
        f"Vector env stepping throughput (`{h.PROG} vector`)",
        key_ratios(results),
        [env_block(r) for r in results],
        panels,
        "steps/s against envs per worker",
        legend_below=True,
    )
