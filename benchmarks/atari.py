"""`python -m benchmarks atari`: Atari samplers stepped with random actions, pararl
against EnvPool, ale-py, Gymnasium and SB3 with the same preprocessing; each backend in
a driver process of its own (`atari_runners`), timed in interleaved blocks.
"""

from __future__ import annotations

import functools
import importlib.util
import multiprocessing as mp
import statistics
from dataclasses import dataclass, field, replace

from benchmarks import atari_runners as ar
from benchmarks.lib import harness as h
from benchmarks.lib import stepping
from benchmarks.lib.figures import Panel
from benchmarks.lib.stepping import deferred_sigint
from pararl.envs.atari import is_atari, register_atari
from pararl.mp.procs import ProcessGroup

FRAME_SKIP = 4  # emulator frames per agent step
START_TIMEOUT_S = 300.0  # building 16 envs on 2 busy cores takes seconds, not minutes
REPLY_TIMEOUT_S = 300.0  # a block takes about a second; this is a hang
CLOSE_GRACE_S = 30.0
TARGETS = {"envpool": 0.9, "ale": 1.0, "gym_async": 2.0}  # pararl ÷ best of each


@dataclass(frozen=True)
class Config(h.Options):
    """Atari samplers: pararl against EnvPool, ale-py's vector env, Gymnasium, SB3.
    --quick: Pong, 2 workers × 1 env, 2 short blocks per backend (< 1 min)."""

    envs: tuple[str, ...] = ("ALE/Pong-v5", "ALE/Breakout-v5")
    """Gymnasium ids of ale-py games (ale-py's vector env and EnvPool take the same game)."""
    workers: tuple[int, ...] = (1, 2)
    """pararl worker processes = EnvPool and ale-py threads (Gymnasium and SB3: one
    process per env whatever this is)."""
    envs_per_worker: tuple[int, ...] = (1, 2, 4, 8)
    """Sweep of envs per worker; total envs = workers × envs per worker."""
    backends: tuple[ar.Backend, ...] = ar.BACKENDS
    """Backends to time; the async modes (batch of half the envs) need 2 envs or more."""
    repeats: int = 5
    """Timed blocks per backend and case, interleaved across backends."""
    block_s: float = 0.5
    """Target seconds per timed block (step counts come from a calibration run)."""
    warmup_steps: int = 20
    """Untimed vector steps after reset, before calibration."""
    seed: int = 0
    """Seed for env resets and the pre-drawn random actions."""


QUICK = {
    "envs": ("ALE/Pong-v5",),
    "workers": (2,),
    "envs_per_worker": (1,),
    "repeats": 2,
    "block_s": 0.05,
    "warmup_steps": 2,
}


@dataclass
class Cell(stepping.Cell):
    """One backend at one point of the sweep; its rate in agent steps/s."""

    thread_cpu_us: float | None = None  # caller thread's CPU µs per agent step (median)
    process_cpu_us: float | None = None  # caller process's CPU µs per agent step (median)
    pipe_bytes: float | None = None  # pickled bytes both ways per agent step (median)
    vs_envpool: float | None = None  # ÷ the best EnvPool cell of the same game and workers


@dataclass
class Results:
    games: list[GameResult]


@dataclass
class GameResult:
    env_id: str
    cells: list[Cell] = field(default_factory=list)

    def best(self, backends: tuple[str, ...], workers: int) -> Cell | None:
        """The fastest measured cell of `backends` at `workers`, any envs per worker."""
        mine = [c for c in self.cells if c.backend in backends and c.workers == workers]
        rated = [c for c in mine if c.rate is not None]
        return max(rated, key=lambda c: c.rate.median if c.rate else 0.0) if rated else None


def resolve(config: Config) -> Config:
    config = h.apply_quick(config, QUICK)
    config = replace(
        config,
        workers=tuple(sorted(set(config.workers))),
        envs_per_worker=tuple(sorted(set(config.envs_per_worker))),
    )
    h.require(
        config,
        ">= 0: warmup_steps",
        ">= 1: envs workers envs_per_worker backends repeats",
        "> 0: block_s",
    )
    h.check(
        [(not register_atari(), "the Atari benchmark needs ale-py: pip install 'pararl[atari]'")]
    )
    h.check((not is_atari(e), f"--envs: '{e}' is not an ale-py game") for e in config.envs)
    return config


def missing(backend: str) -> str | None:
    """Why `backend` cannot run here (its package is not installed), or None."""
    package = {"envpool": "envpool", "sb3": "stable_baselines3"}.get(backend.split("_")[0])
    if package is None or importlib.util.find_spec(package) is not None:
        return None
    return f"{package} is not installed: pip install 'pararl[bench]'"


def fill(cell: Cell, blocks: list[ar.Block]) -> None:
    """Rates, CPU and pipe bytes per agent step of a cell's timed blocks."""
    cell.rate = h.summarize([b.steps / b.wall_s for b in blocks])
    cell.thread_cpu_us = statistics.median(1e6 * b.thread_cpu_s / b.steps for b in blocks)
    cell.process_cpu_us = statistics.median(1e6 * b.process_cpu_s / b.steps for b in blocks)
    counted = [b.pipe_bytes / b.steps for b in blocks if b.pipe_bytes is not None]
    cell.pipe_bytes = statistics.median(counted) if counted else None


def measure_case(case: ar.Case, config: Config) -> list[Cell]:
    where = f"{case.env_id} {case.envs_per_worker} envs/worker × {case.workers}"
    cells: dict[str, Cell] = {
        b: Cell(case.workers, case.envs_per_worker, case.num_envs, b, ar.label(b), "ok")
        for b in config.backends
    }
    for cell in cells.values():
        why = missing(cell.backend)
        if cell.backend in ar.HALF_BATCH and case.num_envs < 2:
            why = "needs 2 envs or more"
        if why:
            cell.status, cell.note = "skipped", why
    names = [b for b, c in cells.items() if c.status == "ok"]
    if not names:
        return list(cells.values())

    def failed(name: str, exc: Exception | str) -> None:
        text = exc if isinstance(exc, str) else h.failure(exc)
        h.progress(f"{where}: {name} failed: {text}")
        cells[name].status, cells[name].note = "failed", text

    h.progress(f"{where}: starting {len(names)} backends ...")
    args = [(name, case, config.warmup_steps) for name in names]
    with deferred_sigint():
        group = ProcessGroup(ar.driver, args, mp.get_context("fork"), "atari-bench", daemon=False)
    try:
        built = group.gather(range(len(names)), START_TIMEOUT_S, "not built in {timeout} s")
        live = {n: i for i, (n, why) in enumerate(zip(names, built, strict=True)) if why is None}
        for name, why in zip(names, built, strict=True):
            if why is not None:
                failed(name, why)
        for name, i in live.items():  # one at a time: calibration needs the cores
            group.send(i, ("calibrate", config.block_s))
            cells[name].steps_per_block = group.gather([i], REPLY_TIMEOUT_S, "hangs")[0]
        blocks: dict[str, list[ar.Block]] = {name: [] for name in live}

        def block(name: str) -> float:
            group.send(live[name], ("block", cells[name].steps_per_block))
            done: ar.Block = group.gather([live[name]], REPLY_TIMEOUT_S, "hangs")[0]
            blocks[name].append(done)
            return done.steps / done.wall_s

        tasks = {name: functools.partial(block, name) for name in live}
        h.interleaved(tasks, config.repeats, failed, rotate=True)
        for name in live:
            if cells[name].status == "ok":
                fill(cells[name], blocks[name])
    finally:
        group.close(CLOSE_GRACE_S)
    return list(cells.values())


def derive(result: GameResult) -> None:
    for c in result.cells:
        best = result.best(ar.ENVPOOL, c.workers)
        c.vs_envpool = h.ratio(c.rate, best.rate if best else None)


def measure(config: Config, meta: h.Metadata) -> Results:
    meta.versions |= {p: h._version(p) for p in ("ale-py", "envpool")}
    ar.preload(config.backends)
    results = Results([GameResult(env_id) for env_id in config.envs])
    for result in results.games:
        for workers in config.workers:
            for epw in config.envs_per_worker:
                case = ar.Case(result.env_id, workers, epw, config.seed)
                result.cells += measure_case(case, config)
        derive(result)
    return results


def us(value: float | None) -> str:
    return h.fmt_num(value, 0 if value is not None and value >= 100 else 1)


CELL_COLUMNS: list[h.Col[Cell]] = [
    h.Col("workers", lambda c: c.workers),
    h.Col("envs/worker", lambda c: c.envs_per_worker),
    h.Col("envs", lambda c: c.num_envs),
    h.Col("backend", lambda c: c.label, "l"),
    h.Col(
        "agent steps/s (min–max)",
        lambda c: h.fmt_spread(c.rate) if c.rate else f"{c.status} ({c.note})",
    ),
    h.Col("frames/s", lambda c: h.fmt_rate(c.rate.median * FRAME_SKIP if c.rate else None)),
    h.Col("vs best EnvPool", lambda c: h.fmt_ratio(c.vs_envpool)),
    h.Col("caller CPU µs/step: thread", lambda c: us(c.thread_cpu_us)),
    h.Col("process", lambda c: us(c.process_cpu_us)),
    h.Col(
        "pipe bytes/step",
        lambda c: "no pipes" if c.rate and c.pipe_bytes is None else h.fmt_num(c.pipe_bytes, 0),
    ),
]


@dataclass
class Target:
    """pararl's best cell at a worker count against the best of each anchor."""

    env_id: str
    workers: int
    pararl: Cell | None
    anchors: dict[str, Cell | None]

    def ratio(self, anchor: str) -> float | None:
        other = self.anchors[anchor]
        return h.ratio(self.pararl.rate if self.pararl else None, other.rate if other else None)


def targets(results: list[GameResult]) -> list[Target]:
    groups = {"envpool": ar.ENVPOOL, "ale": ar.ALE, "gym_async": ("gym_async",)}
    return [
        Target(
            r.env_id,
            w,
            r.best(ar.PARARL, w),
            {name: r.best(backends, w) for name, backends in groups.items()},
        )
        for r in results
        for w in sorted({c.workers for c in r.cells})
    ]


def where(cell: Cell | None) -> str:
    if cell is None or cell.rate is None:
        return "–"
    return f"{h.fmt_rate(cell.rate.median)} ({cell.label}, {cell.envs_per_worker}/worker)"


def versus(t: Target, anchor: str) -> str:
    value, goal = t.ratio(anchor), TARGETS[anchor]
    return "–" if value is None else f"{value:.2f}× ({'met' if value >= goal else 'missed'})"


TARGET_COLUMNS: list[h.Col[Target]] = [
    h.Col("game", lambda t: t.env_id, "l"),
    h.Col("workers", lambda t: t.workers),
    h.Col("best pararl", lambda t: where(t.pararl), "l"),
    h.Col("best EnvPool", lambda t: where(t.anchors["envpool"]), "l"),
    h.Col(f"pararl ÷ EnvPool (≥ {TARGETS['envpool']})", lambda t: versus(t, "envpool")),
    h.Col("best ale-py", lambda t: where(t.anchors["ale"]), "l"),
    h.Col(f"÷ ale-py (≥ {TARGETS['ale']})", lambda t: versus(t, "ale")),
    h.Col("best AsyncVectorEnv", lambda t: where(t.anchors["gym_async"]), "l"),
    h.Col(f"÷ Async (≥ {TARGETS['gym_async']})", lambda t: versus(t, "gym_async")),
]


def key_ratios(found: list[Target]) -> str:
    parts = []
    for t in found:
        if t.pararl is None:
            continue
        ratios = ", ".join(
            f"{t.ratio(a):.2f}× best {name}"
            for a, name in (("envpool", "EnvPool"), ("ale", "ale-py"), ("gym_async", "Async"))
            if t.ratio(a) is not None
        )
        workers = f"{t.workers} worker{'s' * (t.workers > 1)}"
        parts.append(f"**{t.env_id.split('/')[-1]}, {workers}**: {ratios or '–'}")
    return "; ".join(parts) or "no pararl results"


NOTES = (
    "Random actions; agent steps/s (frames/s = {skip} × that), median of the interleaved "
    "blocks with their min–max. Workers are pararl's processes and EnvPool's and "
    "ale-py's threads; Gymnasium and SB3 run one process per env. Vs best EnvPool: ÷ the "
    "fastest EnvPool cell (either mode, any envs/worker) of the same game and workers. "
    "Caller CPU: CPU time per agent step of the process that steps the sampler, its "
    "calling thread and the whole process (EnvPool's and ale-py's env threads live in "
    "it). Pipe bytes: pickled messages both ways through the sampler's pipes per agent "
    "step. This machine has {cores} cores, shared with other work: more workers than "
    "cores (or Gymnasium's and SB3's one process per env) oversubscribe it, and the "
    "absolute numbers move from run to run; the ratios within one run are what to read."
)


def game_block(r: GameResult, cores: int) -> str:
    notes = NOTES.format(skip=FRAME_SKIP, cores=cores)
    return f"### {r.env_id}\n\n{notes}\n\n{h.table(CELL_COLUMNS, r.cells)}"


def panel(r: GameResult, workers: int) -> Panel:
    """At `workers`; dashed: the single env's median rate."""
    cells = [c for c in r.cells if c.workers == workers]
    singles = [c.rate.median for c in cells if c.backend == "single" and c.rate]
    line = (statistics.median(singles), ar.label("single")) if singles else None
    title = f"{r.env_id}, {workers} worker{'s' * (workers > 1)}"
    return stepping.panel(title, cells, ar.label, "agent steps / s", line)


def report(results: Results, meta: h.Metadata) -> h.Report:
    games, found = results.games, targets(results.games)
    summary = (
        "### Targets\n\npararl's best cell (step or send/recv, any envs/worker) against each "
        f"anchor's best at the same workers.\n\n{h.table(TARGET_COLUMNS, found)}"
    )
    blocks = [summary, *(game_block(r, meta.physical_cores) for r in games)]
    return h.Report(
        f"Atari sampler (`{h.PROG} atari`)",
        key_ratios(found),
        blocks,
        [panel(r, w) for r in games for w in sorted({c.workers for c in r.cells})],
        "agent steps/s against envs per worker",
        legend_below=True,
    )
