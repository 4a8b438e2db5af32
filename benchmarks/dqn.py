"""`python -m benchmarks dqn`: DQN end to end, in three parts (--parts).

1. `solve`: time to solve CartPole-v1, whole processes from launch to exit: `pararl
   train dqn --mode {serial,sync,async}` and `--mode averaging --workers 2` against
   SB3 DQN with the rl-baselines3-zoo settings, one run per system and seed.
2. `throughput`: transitions/s of the seed post's design (a network pickled through a
   pipe per step, one transition per message) against pararl's async loop with the
   same number of actor processes, with its replay ratio and free-running.
3. `overlap`: pararl's actors alone, learner alone, and both in the loop.

Drivers and the seed design: `benchmarks.dqn_drivers`. Spells of `block_s` (after
`warmup_s` untimed) on drivers kept open for the whole part, interleaved `repeats`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Literal

from benchmarks import harness as h
from benchmarks.dqn_drivers import Mode, Pararl, SeedDesign, Workload, workload_config
from benchmarks.figures import Panel, Series
from benchmarks.solve import (
    SOLVE_QUICK,
    SolveOptions,
    SolveResult,
    check_solve,
    measure_solve,
    ratios_text,
    solve_block,
    solve_panel,
)
from pararl.runners.dqn import default_actors

NAME = "dqn"
Part = Literal["solve", "throughput", "overlap"]
System = Literal["pararl-serial", "pararl-sync", "pararl-async", "pararl-averaging", "sb3"]
LABELS = {
    "pararl-serial": "pararl serial",
    "pararl-sync": "pararl sync",
    "pararl-async": "pararl async",
    "pararl-averaging": "pararl averaging, 2 replicas",
    "sb3": "SB3 DQN (zoo)",
    "seed_design": "seed design (net per step)",
    "pararl_seed": "pararl async, seed's workload",
    "pararl_defaults": "pararl async, defaults",
    "pararl_seed_free": "pararl async, seed's workload, no ratio",
    "pararl_defaults_free": "pararl async, defaults, no ratio",
    "actors": "actors alone",
    "learner": "learner alone",
    "ratio": "together (replay ratio, as training)",
    "free": "together (free-running)",
}


@dataclass(frozen=True)
class Config(SolveOptions, h.Options):
    """DQN: time to solve CartPole against SB3, transitions/s against the seed's design,
    and the overlap of acting and learning. --quick: 1 seed, 1,200-step budget, short
    spells (1-2 min)."""

    parts: tuple[Part, ...] = ("solve", "throughput", "overlap")
    """Parts to run."""
    systems: tuple[System, ...] = tuple(LABELS)[:5]  # type: ignore[assignment]
    """solve: systems to time."""
    actors: tuple[int, ...] = (1, 2)
    """throughput: actor process counts (the seed's children, pararl's actors)."""
    workloads: tuple[Workload, ...] = ("seed", "defaults")
    """throughput: pararl configs; `seed`: the seed's net, batch, lr, gamma and update rate
    on pararl's machinery; `defaults`: pararl's DQN defaults."""
    overlap_actors: int | None = None
    """overlap: actor processes (default: what `pararl train` uses, cores - 1)."""
    overlap_workload: Workload = "defaults"
    """overlap: pararl config of the learner and actors."""
    repeats: int = 3
    """throughput/overlap: timed spells per system, interleaved."""
    block_s: float = 3.0
    """throughput/overlap: seconds per timed spell."""
    warmup_s: float = 1.0
    """throughput/overlap: untimed seconds before each spell."""
    learner_threads: int | None = None
    """throughput/overlap: torch threads of this (learner) process; default: what
    `pararl train` chooses for the model (`set_learner_threads`)."""
    seed: int = 0
    """throughput/overlap: seed of the envs, nets and replay sampling."""


QUICK = {
    **SOLVE_QUICK,
    "budget": 1_200,
    "eval_every": 600,
    "workloads": ("seed",),
    "repeats": 2,
    "block_s": 0.6,
    "warmup_s": 0.3,
}


def resolve(config: Config) -> Config:
    config = h.apply_quick(config, QUICK)
    if "solve" in config.parts:
        check_solve(config)
    h.require(config, ">= 0: parts warmup_s", ">= 1: actors overlap_actors repeats learner_threads")
    h.require(config, "> 0: block_s")
    if "throughput" in config.parts:
        h.require(config, ">= 0: workloads")
    return config


@dataclass
class RateRow:
    """One system (throughput) or spell (overlap): env steps/s and updates/s."""

    actors: int
    system: str
    label: str
    status: str = "ok"
    note: str = ""
    steps: h.Summary | None = None
    updates: h.Summary | None = None
    vs_seed: float | None = None


@dataclass
class Overlap:
    """Together ÷ alone for each side; the ratio run against the ideal overlap, min(the
    actors' rate, what the learner alone allows at the replay ratio)."""

    actors: int
    workload: str
    replay_ratio: float
    batch_size: int
    hidden: tuple[int, ...]
    actors_ratio: float | None
    learner_ratio: float | None
    actors_free: float | None
    learner_free: float | None
    ideal_steps_per_s: float | None
    ratio_vs_ideal: float | None


@dataclass
class Results:
    solve: SolveResult | None = None
    throughput: list[RateRow] = field(default_factory=list)
    overlap: list[RateRow] = field(default_factory=list)
    efficiency: Overlap | None = None


def _spells(
    runners: dict[str, tuple[Pararl | SeedDesign, Mode]], rows: dict[str, RateRow], c: Config
) -> None:
    """The interleaved spells of every runner; failures are noted in the rows."""
    steps: dict[str, list[float]] = {n: [] for n in rows}
    updates: dict[str, list[float]] = {n: [] for n in rows}

    def spell(name: str) -> float:
        runner, mode = runners[name]
        if isinstance(runner, SeedDesign):
            runner.run_for(c.warmup_s)
            seconds, count = h.timed(functools.partial(runner.run_for, c.block_s))
            steps[name].append(count / seconds)
        else:
            s = runner.spell(mode, c.block_s, c.warmup_s)
            if mode != "learner":
                steps[name].append(s.env_steps / s.seconds)
            if mode != "actors":
                updates[name].append(s.updates / s.seconds)
        return 0.0

    def failed(name: str, exc: Exception) -> None:
        h.progress(f"{name} failed: {h.failure(exc)}")
        rows[name].status, rows[name].note = "failed", h.failure(exc)

    h.interleaved({n: functools.partial(spell, n) for n in runners}, c.repeats, failed)
    for name, row in rows.items():
        row.steps, row.updates = h.maybe(steps[name]), h.maybe(updates[name])


def throughput(actors: int, c: Config) -> list[RateRow]:
    """The seed design and pararl (each workload, ratio and free) with `actors` actors."""
    names = ["seed_design"] + [f"pararl_{w}{f}" for w in c.workloads for f in ("", "_free")]
    rows = {n: RateRow(actors, n, LABELS[n]) for n in names}
    runners: dict[str, tuple[Pararl | SeedDesign, Mode]] = {}
    opened: list[Pararl | SeedDesign] = []
    h.progress(f"throughput, {actors} actor(s): starting ...")
    try:
        for name in names:
            try:
                runner: Pararl | SeedDesign
                if name == "seed_design":
                    runner = SeedDesign(actors, c.seed)
                else:
                    cfg = workload_config(name.split("_")[1], seed=c.seed)  # type: ignore[arg-type]
                    cfg = replace(cfg, replay_ratio=0.0) if name.endswith("_free") else cfg
                    runner = Pararl(cfg, actors, c.learner_threads, h.progress)
                opened.append(runner)
                runners[name] = (runner, "loop")
            except Exception as exc:
                rows[name].status, rows[name].note = "failed", h.failure(exc)
        _spells(runners, rows, c)
    finally:
        for runner in opened:
            runner.close()
    for row in rows.values():
        row.vs_seed = h.ratio(row.steps, rows["seed_design"].steps)
    return list(rows.values())


def overlap(c: Config) -> tuple[list[RateRow], Overlap]:
    """Actors alone, learner alone and the free-running loop on one free-running driver
    (replay ratio 0: no ratio to keep between spells); the ratio loop on its own."""
    cfg = workload_config(c.overlap_workload, seed=c.seed)
    actors = c.overlap_actors or default_actors(cfg)
    rows = {n: RateRow(actors, n, LABELS[n]) for n in ("actors", "learner", "ratio", "free")}
    h.progress(f"overlap: starting {actors} actor(s) ({c.overlap_workload} workload) ...")
    free = Pararl(replace(cfg, replay_ratio=0.0), actors, c.learner_threads, h.progress)
    try:
        ratio = Pararl(cfg, actors, c.learner_threads, h.progress)
        try:
            runs: dict[str, tuple[Pararl | SeedDesign, Mode]] = {
                "actors": (free, "actors"),
                "learner": (free, "learner"),
                "ratio": (ratio, "loop"),
                "free": (free, "loop"),
            }
            _spells(runs, rows, c)
        finally:
            ratio.close()
    finally:
        free.close()
    alone_steps, alone_updates = rows["actors"].steps, rows["learner"].updates
    bound = None
    if alone_steps and alone_updates:
        bound = min(alone_steps.median, alone_updates.median / cfg.replay_ratio)
    eff = Overlap(
        actors,
        c.overlap_workload,
        cfg.replay_ratio,
        cfg.batch_size,
        cfg.hidden,
        actors_ratio=h.ratio(rows["ratio"].steps, alone_steps),
        learner_ratio=h.ratio(rows["ratio"].updates, alone_updates),
        actors_free=h.ratio(rows["free"].steps, alone_steps),
        learner_free=h.ratio(rows["free"].updates, alone_updates),
        ideal_steps_per_s=bound,
        ratio_vs_ideal=h.ratio(rows["ratio"].steps, bound),
    )
    h.progress(f"overlap: {eff}")
    return list(rows.values()), eff


def measure(c: Config, meta: h.Metadata) -> Results:
    import torch

    if c.learner_threads is not None:
        torch.set_num_threads(c.learner_threads)
    meta.machine_note = f"; learner process torch threads: {torch.get_num_threads()}"
    out = Results()
    if "solve" in c.parts:
        out.solve = measure_solve(c.systems, c, "dqn", LABELS)
    if "throughput" in c.parts:
        out.throughput = [r for n in sorted(set(c.actors)) for r in throughput(n, c)]
    if "overlap" in c.parts:
        out.overlap, out.efficiency = overlap(c)
    return out


THROUGHPUT: list[h.Col[RateRow]] = [
    h.Col("actors", lambda r: r.actors),
    h.Col("system", lambda r: r.label, "l"),
    h.Col(
        "transitions/s (median)",
        lambda r: h.fmt_rate(h.med(r.steps)) if r.status == "ok" else f"{r.status} ({r.note})",
    ),
    h.Col("min–max", lambda r: h.fmt_range(r.steps)),
    h.Col("updates/s", lambda r: h.fmt_rate(h.med(r.updates))),
    h.Col("vs seed", lambda r: h.fmt_ratio(r.vs_seed)),
]
OVERLAP: list[h.Col[RateRow]] = [
    h.Col("spell", lambda r: r.label, "l"),
    h.Col("env steps/s", lambda r: h.fmt_rate(h.med(r.steps))),
    h.Col("min–max", lambda r: h.fmt_range(r.steps)),
    h.Col("updates/s", lambda r: h.fmt_rate(h.med(r.updates))),
    h.Col("min–max", lambda r: h.fmt_range(r.updates)),
]


def throughput_panel(rows: list[RateRow]) -> Panel:
    """Transitions/s per system (min–max bars, the ratio to the seed noted), per count."""
    counts = sorted({row.actors for row in rows})
    systems = list(dict.fromkeys(row.system for row in rows))
    series = []
    for i, name in enumerate(systems):
        mine = [row for row in rows if row.system == name and row.steps]
        off = -0.3 + i * 0.6 / max(1, len(systems) - 1)
        points = [(counts.index(row.actors) + off, row.steps) for row in mine if row.steps]
        s = Series.of(LABELS[name], points, kind="points")
        s.notes = [h.fmt_ratio(row.vs_seed) if row.vs_seed else "" for row in mine]
        series.append(s)
    ticks = [(i, f"{n} actor(s)") for i, n in enumerate(counts)]
    ylabel = "transitions / s (median, min–max)"
    return Panel("seed design vs pararl async", series, ylabel=ylabel, xticks=ticks, logy=True)


def overlap_panel(e: Overlap) -> Panel:
    bars = [
        ("actors, replay ratio", e.actors_ratio, "C0"),
        ("learner, replay ratio", e.learner_ratio, "C1"),
        ("async run ÷ ideal", e.ratio_vs_ideal, "C2"),
        ("actors, free-running", e.actors_free, "C0"),
        ("learner, free-running", e.learner_free, "C1"),
    ]
    series = [Series(None, [i], [v or 0.0], "bar", color=c) for i, (_, v, c) in enumerate(bars)]
    return Panel(
        f"async overlap, {e.actors} actor(s)",
        series,
        ylabel="fraction (together ÷ alone; run ÷ ideal)",
        xticks=[(i, b[0]) for i, b in enumerate(bars)],
        ylim=(0, 1.2),
        xrotation=20,
        hlines=[(0.8, "--", "target 0.8")],
    )


def report(r: Results, meta: h.Metadata) -> h.Report:
    p = meta.params
    blocks, panels, ratios = [], [], []
    if r.solve:
        blocks.append(solve_block(r.solve, p))
        panels.append(solve_panel(r.solve))
        ratios.append(f"time to solve ÷ SB3 (target ≤ 0.5): {ratios_text(r.solve)}")
    if r.throughput:
        blocks.append(
            "### Transitions/s: the seed's design against pararl async\n\nTransitions stored "
            "per second by the learner process, steady state (the seed design's memory starts "
            f"full so that it learns every 5 transitions from the start); {p['repeats']} "
            f"interleaved spells of {p['block_s']:g} s after {p['warmup_s']:g} s warm-up. "
            "pararl runs its production learner loop (`DQNLoop`, replay ratio gating; `no "
            "ratio`: replay ratio 0) without evaluation or logging.\n\n"
            + h.table(THROUGHPUT, r.throughput)
        )
        counts = sorted({row.actors for row in r.throughput})
        for n in counts:
            text = ", ".join(
                f"{row.label} {h.fmt_ratio(row.vs_seed)}"
                for row in r.throughput
                if row.actors == n and row.system != "seed_design"
            )
            ratios.append(f"{n} actor(s), transitions/s ÷ seed (target ≥ 100×): {text}")
        panels.append(throughput_panel(r.throughput))
    if r.efficiency:
        e = r.efficiency
        blocks.append(
            f"### Overlap of acting and learning (pararl async)\n\n{e.actors} actor(s), "
            f"{e.workload} workload (net {e.hidden}, batch {e.batch_size}, replay ratio "
            f"{e.replay_ratio:g}). Together ÷ alone — replay-ratio run: actors "
            f"{h.fmt_pct(e.actors_ratio)}, learner {h.fmt_pct(e.learner_ratio)}; free-running: "
            f"actors {h.fmt_pct(e.actors_free)}, learner {h.fmt_pct(e.learner_free)}. With a "
            "replay ratio at most one side can run flat out: the ideal is min(actors alone, "
            f"learner alone ÷ ratio) = {h.fmt_rate(e.ideal_steps_per_s)} steps/s, and the run "
            f"reaches {h.fmt_pct(e.ratio_vs_ideal)} of it.\n\n" + h.table(OVERLAP, r.overlap)
        )
        ratios.append(
            "overlap together ÷ alone, free-running (target ≥ 80% both): actors "
            f"{h.fmt_pct(e.actors_free)}, learner {h.fmt_pct(e.learner_free)}; with the replay "
            f"ratio, the run reaches {h.fmt_pct(e.ratio_vs_ideal)} of the slower side's limit"
        )
        panels.append(overlap_panel(e))
    return h.Report(
        f"DQN: time to solve, throughput against the seed, overlap (`{h.PROG} dqn`)",
        "; ".join(ratios),
        blocks,
        panels,
        "DQN benchmark",
    )


def run(config: Config) -> Results:
    return h.execute(NAME, config, resolve, measure, report)
