"""`pararl bench vector`: env-stepping throughput of pararl's `ParallelVectorEnv`
(full steps and partial stepping) against Gymnasium's and SB3's vector envs and
a single env's raw step rate, over a sweep of envs per worker.

For each (env, envs per worker) case every backend is created once, warmed up,
and given a step count that takes about `block_s`; then the blocks run
interleaved (A, B, C, A, B, C, ...) `repeats` times and the median is reported
with min and max, next to the ratio to AsyncVectorEnv's best setting for that
env and the efficiency against workers × the single-env rate.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym

from pararl.bench.common import (
    command_line,
    cores_text,
    interleaved,
    progress,
    relative_link,
    replace_section,
    repo_root,
    run_metadata,
    summarize,
    timed,
    write_json,
)
from pararl.bench.publish import OutputOptions
from pararl.bench.vector_backends import (
    ALL_BACKENDS,
    PROCESS_PER_ENV,
    BackendName,
    EnvCase,
    OpenBackends,
    Runner,
    make_env,
    open_backend,
)
from pararl.bench.vector_report import (
    CaseResult,
    Cell,
    EnvResult,
    env_table,
    key_ratios,
    markdown_section,
    plot,
)
from pararl.errors import UsageError
from pararl.vector import physical_cores

PROG = "pararl bench vector"
SECTION = "vector"


@dataclass(frozen=True)
class VectorBenchConfig(OutputOptions):
    """Vector-env stepping throughput: pararl against Gymnasium, SB3 and one env.

    --quick sets the options left at their defaults to a tiny sweep and writes only
    into --out-dir (BENCHMARKS.md stays as it is unless --update-benchmarks True).
    """

    quick: bool = False
    """Fast check (< 1 min): CartPole + StepCost, 1 and 16 envs/worker, 2 short repeats."""

    envs: tuple[str, ...] = ("CartPole-v1", "HalfCheetah-v5", "pararl/StepCost-v0")
    """Gymnasium env ids; one whose simulator is missing (MuJoCo) is skipped with a note."""

    envs_per_worker: tuple[int, ...] = (1, 4, 16, 64, 256, 512)
    """Sweep of envs per worker; total envs = workers × envs per worker."""

    workers: int | None = None
    """pararl worker processes; default: the physical cores available to this process."""

    backends: tuple[BackendName, ...] = ALL_BACKENDS
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


def resolve(config: VectorBenchConfig) -> VectorBenchConfig:
    """Apply --quick to the options left at their defaults, then check every value."""
    if config.quick:
        defaults = VectorBenchConfig()
        changes: dict[str, Any] = {
            k: v for k, v in QUICK.items() if getattr(config, k) == getattr(defaults, k)
        }
        config = dataclasses.replace(config, **changes)
    config = dataclasses.replace(config, envs_per_worker=tuple(sorted(set(config.envs_per_worker))))
    problems = [
        (not config.envs, "--envs needs at least one env id"),
        (not config.backends, "--backends needs at least one backend"),
        (
            not config.envs_per_worker or min(config.envs_per_worker) < 1,
            "--envs-per-worker needs values >= 1",
        ),
        (config.workers is not None and config.workers < 1, "--workers must be >= 1"),
        (config.repeats < 1, "--repeats must be >= 1 (3 or more for results worth keeping)"),
        (not config.block_s > 0, "--block-s must be > 0"),
        (config.warmup_iters < 0, "--warmup-iters must be >= 0"),
        (config.step_cost_us < 0, "--step-cost-us must be >= 0"),
        (
            config.tail_alpha != 0 and not config.tail_alpha > 1,
            "--tail-alpha must be 0 (no tail) or > 1 (a tail with a finite mean)",
        ),
        (not config.timeout_s > 0, "--timeout-s must be > 0"),
        (config.max_process_per_env < 0, "--max-process-per-env must be >= 0"),
        (
            config.context is not None and config.context not in mp.get_all_start_methods(),
            f"--context {config.context} is not available here",
        ),
    ]
    for bad, message in problems:
        if bad:
            raise UsageError(message)
    return config


def env_kwargs(env_id: str, config: VectorBenchConfig) -> dict[str, float]:
    if env_id.split("/")[-1].startswith("StepCost"):
        return {"cost_us": config.step_cost_us, "tail_alpha": config.tail_alpha}
    return {}


def probe_env(env_id: str, kwargs: dict[str, float]) -> str | None:
    """None if the env can be built; why not if its simulator is missing. An id that
    does not exist is the user's mistake: that raises UsageError."""
    try:
        env = make_env(env_id, kwargs)
    except gym.error.DependencyNotInstalled as exc:
        return f"its dependencies are not installed ({exc})"
    except ImportError as exc:
        return f"cannot import {exc.name or 'a dependency'} ({exc}); pip install 'pararl[bench]'"
    except gym.error.Error as exc:
        raise UsageError(f"--envs: cannot make '{env_id}': {exc}") from exc
    env.close()
    return None


def calibrate(runner: Runner, block_s: float) -> int:
    """Steps (a multiple of the runner's unit) that take about `block_s`."""
    probe_s = max(0.02, block_s / 5)
    steps = runner.unit
    while True:
        elapsed, done = timed(functools.partial(runner.run, steps))
        if elapsed >= probe_s:
            break
        # Grow geometrically towards the probe length; capped so one noisy fast
        # probe cannot jump to an hour-long block.
        steps = math.ceil(steps * min(8.0, max(2.0, 1.2 * probe_s / max(elapsed, 1e-6))))
    units = math.ceil(done / elapsed * block_s / runner.unit)
    return max(1, units) * runner.unit


def _reap_new_children(before: set[int]) -> None:
    """Last resort after close(): end any child this case started that still runs
    (an anchor whose close failed half-way). Children from before are not ours."""
    for proc in mp.active_children():
        if proc.pid not in before:
            proc.terminate()
            proc.join(1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)


def _measure(
    backends: OpenBackends, cells: dict[str, Cell], config: VectorBenchConfig, where: str
) -> None:
    """Warm up and calibrate every runner, then time the interleaved blocks."""
    steps: dict[str, int] = {}

    def failed(name: str, exc: Exception) -> None:
        progress(f"{where}: {name} failed: {type(exc).__name__}: {exc}")
        cells[name] = Cell(name, "failed", f"{type(exc).__name__}: {exc}")

    for name, runner in backends.runners.items():
        try:
            runner.reset()
            runner.run(config.warmup_iters * runner.unit)
            steps[name] = calibrate(runner, config.block_s)
        except Exception as exc:
            failed(name, exc)

    def block(name: str) -> float:
        runner = backends.runners[name]
        elapsed, done = timed(functools.partial(runner.run, steps[name]))
        return float(done / elapsed)

    samples = interleaved(
        {name: functools.partial(block, name) for name in steps}, config.repeats, on_error=failed
    )
    for name, rates in samples.items():
        if name not in cells:  # not failed
            cells[name] = Cell(name, "ok", steps_per_block=steps[name], rate=summarize(rates))


def measure_case(case: EnvCase, config: VectorBenchConfig) -> CaseResult:
    where = f"{case.env_id} {case.envs_per_worker} envs/worker × {case.workers}"
    cells: dict[str, Cell] = {}
    wanted = []
    for name in config.backends:
        if name in PROCESS_PER_ENV and case.num_envs > config.max_process_per_env:
            cells[name] = Cell(name, "skipped", f"{case.num_envs} processes")
        else:
            wanted.append(name)
    before = {p.pid for p in mp.active_children() if p.pid is not None}
    backends = OpenBackends()
    start = time.perf_counter()
    try:
        progress(f"{where}: starting {len(wanted)} backends ...")
        for name in wanted:
            try:
                open_backend(name, case, backends)
            except Exception as exc:
                progress(f"{where}: {name} failed to start: {type(exc).__name__}: {exc}")
                cells[name] = Cell(name, "failed", f"start: {type(exc).__name__}: {exc}")
        _measure(backends, cells, config, where)
    finally:
        backends.close()
        _reap_new_children(before)
    progress(f"{where}: done in {time.perf_counter() - start:.1f} s")
    ordered: dict[str, Cell] = {name: cells[name] for name in config.backends if name in cells}
    return CaseResult(case.envs_per_worker, case.num_envs, ordered)


def measure_env(
    env_id: str, workers: int, config: VectorBenchConfig, skipped: str | None = None
) -> EnvResult:
    """The sweep over envs per worker for one env (none if `skipped` says why not)."""
    kwargs = env_kwargs(env_id, config)
    result = EnvResult(env_id, kwargs, workers, skipped=skipped)
    if result.skipped:
        progress(f"{env_id}: skipped: {result.skipped}")
        return result
    for epw in config.envs_per_worker:
        case = EnvCase(
            env_id,
            kwargs,
            workers,
            epw,
            config.context,
            config.autoreset_mode,
            config.timeout_s,
            config.seed,
        )
        result.cases.append(measure_case(case, config))
    result.derive()
    return result


def run(config: VectorBenchConfig) -> None:
    """Run the whole sweep, print the tables, write JSON, PNG and (full mode) the
    BENCHMARKS.md section."""
    command = command_line(PROG, config)
    config = resolve(config)
    workers = config.workers or physical_cores()
    # Every env is built once up front: a typo fails before minutes of measuring.
    skipped = {env_id: probe_env(env_id, env_kwargs(env_id, config)) for env_id in config.envs}
    root = repo_root()
    out_dir = config.out_dir or root / "bench_results"
    figure = config.figure or (
        out_dir / "bench_vector.png" if config.quick else root / "figures" / "bench_vector.png"
    )
    benchmarks_md = config.benchmarks_md or root / "BENCHMARKS.md"
    update = (not config.quick) if config.update_benchmarks is None else config.update_benchmarks
    params = {**dataclasses.asdict(config), "workers_resolved": workers}
    meta = run_metadata(params, command)

    start = time.perf_counter()
    results = [measure_env(env_id, workers, config, skipped[env_id]) for env_id in config.envs]
    meta["wall_s"] = round(time.perf_counter() - start, 1)

    tables = [env_table(r, config.timeout_s) for r in results]
    ratios = key_ratios(results, config.timeout_s)
    figure_written = plot(results, figure, config.timeout_s)
    json_path = write_json(
        out_dir / "vector.json",
        {
            "benchmark": SECTION,
            "metadata": meta,
            "key_ratios": ratios,
            "figure": None if figure_written is None else str(figure_written),
            "results": [r.as_dict(config.timeout_s) for r in results],
        },
    )
    print(
        f"## {PROG}: {meta['date']}, commit {meta['git_commit'] or 'unknown'}, "
        f"cores {cores_text(meta)}, {meta['wall_s']} s\n"
    )
    print("\n\n".join(tables))
    print(f"\nKey ratios: {ratios}.\n")
    print(f"wrote {json_path}" + (f" and {figure_written}" if figure_written else ""))
    if update:
        link = (
            None if figure_written is None else relative_link(figure_written, benchmarks_md.parent)
        )
        replace_section(benchmarks_md, SECTION, markdown_section(meta, tables, link, ratios))
        print(f"updated {benchmarks_md} (section bench:{SECTION})")
