"""`python -m benchmarks dqn`: DQN's time to solve against SB3 (`solve`, a row of
`lib.compare`) and transitions/s against the DQN post's design (`throughput`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Literal

from benchmarks.lib import compare
from benchmarks.lib import dqn_spells as drivers
from benchmarks.lib import harness as h
from benchmarks.lib.compare import Outcome, System
from benchmarks.lib.figures import Panel, Series

Part = Literal["solve", "throughput"]
SOLVE = compare.solve_cartpole("dqn", (
    System("pararl-serial", "pararl serial", "dqn", {"mode": "serial"}),
    System("pararl-sync", "pararl sync", "dqn", {"mode": "sync"}),
    System("pararl-async", "pararl async", "dqn", {"mode": "async"}),
    # `--mode averaging --workers 2`, whatever the machine
    System("pararl-averaging", "pararl averaging, 2 replicas", "dqn",
           {"mode": "averaging", "workers": 2}),
), budget=100_000, quick=1_200)  # fmt: skip
LABELS = {
    "seed_design": "DQN post's design (net per step)",
    "pararl_seed": "pararl async, seed's workload",
    "pararl_defaults": "pararl async, defaults",
    "pararl_seed_free": "pararl async, seed's workload, no ratio",
    "pararl_defaults_free": "pararl async, defaults, no ratio",
}


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """DQN: time to solve CartPole against SB3, and transitions/s against the DQN post's
    design. --quick: 1 seed, 1,200-step budget, short spells (1-2 min)."""

    parts: tuple[Part, ...] = ("solve", "throughput")
    """Parts to run."""
    actors: tuple[int, ...] = (1, 2)
    """throughput: actor process counts (the DQN post's children, pararl's actors)."""
    workloads: tuple[drivers.Workload, ...] = ("seed", "defaults")
    """throughput: pararl configs; `seed`: the DQN post's net, batch, lr, gamma and update rate
    on pararl's machinery; `defaults`: pararl's DQN defaults."""
    repeats: int = 3
    """throughput: timed spells per system, interleaved."""
    block_s: float = 3.0
    """throughput: seconds per timed spell."""
    warmup_s: float = 1.0
    """throughput: untimed seconds before each spell."""
    learner_threads: int | None = None
    """throughput: torch threads of this (learner) process; default: what
    `pararl train` chooses for the model (`set_learner_threads`)."""
    seed: int = 0
    """throughput: seed of the envs, nets and replay sampling."""


QUICK = {
    "workloads": ("seed",),
    "repeats": 2,
    "block_s": 0.6,
    "warmup_s": 0.3,
}


def resolve(config: Config) -> Config:
    config = h.apply_quick(compare.resolve(SOLVE, config), QUICK)
    h.require(config, ">= 0: parts warmup_s", ">= 1: actors repeats learner_threads")
    h.require(config, "> 0: block_s")
    if "throughput" in config.parts:
        h.require(config, ">= 0: workloads")
    return config


@dataclass
class Results:
    solve: Outcome | None = None
    throughput: list[drivers.RateRow] = field(default_factory=list)


def throughput(actors: int, c: Config) -> list[drivers.RateRow]:
    """The DQN post's design and pararl (each workload, ratio and free) with `actors` actors."""
    names = ["seed_design"] + [f"pararl_{w}{f}" for w in c.workloads for f in ("", "_free")]
    rows = {n: drivers.RateRow(actors, n, LABELS[n]) for n in names}
    runners: drivers.Runs = {}
    opened: list[drivers.Pararl | drivers.SeedDesign] = []
    h.progress(f"throughput, {actors} actor(s): starting ...")
    try:
        for name in names:
            try:
                runner: drivers.Pararl | drivers.SeedDesign
                if name == "seed_design":
                    runner = drivers.SeedDesign(actors, c.seed)
                else:
                    cfg = drivers.workload_config(name.split("_")[1], seed=c.seed)  # type: ignore[arg-type]
                    cfg = replace(cfg, replay_ratio=0.0) if name.endswith("_free") else cfg
                    runner = drivers.Pararl(cfg, actors, c.learner_threads, h.progress)
                opened.append(runner)
                runners[name] = (runner, "loop")
            except Exception as exc:
                rows[name].status, rows[name].note = "failed", h.failure(exc)
        drivers.spells(runners, rows, c.repeats, c.block_s, c.warmup_s)
    finally:
        for runner in opened:
            runner.close()
    for row in rows.values():
        row.vs = h.ratio(row.steps, rows["seed_design"].steps)
    return list(rows.values())


def measure(c: Config, meta: h.Metadata) -> Results:
    import torch

    if c.learner_threads is not None:
        torch.set_num_threads(c.learner_threads)
    meta.machine_note = f"; learner process torch threads: {torch.get_num_threads()}"
    out = Results()
    if "solve" in c.parts:
        out.solve = compare.measure(SOLVE, c, meta)
    if "throughput" in c.parts:
        out.throughput = [r for n in sorted(set(c.actors)) for r in throughput(n, c)]
    return out


THROUGHPUT: list[h.Col[drivers.RateRow]] = [
    h.Col("actors", lambda r: r.actors),
    h.Col("system", lambda r: r.label, "l"),
    h.Col(
        "transitions/s (median)",
        lambda r: h.fmt_rate(h.med(r.steps)) if r.status == "ok" else f"{r.status} ({r.note})",
    ),
    h.Col("min–max", lambda r: h.fmt_range(r.steps)),
    h.Col("updates/s", lambda r: h.fmt_rate(h.med(r.updates))),
    h.Col("vs seed", lambda r: h.fmt_ratio(r.vs)),
]


def throughput_panel(rows: list[drivers.RateRow]) -> Panel:
    """Transitions/s per system (min–max bars, the ratio to the seed noted), per count."""
    counts = sorted({row.actors for row in rows})
    systems = list(dict.fromkeys(row.system for row in rows))
    series = []
    for i, name in enumerate(systems):
        mine = [row for row in rows if row.system == name and row.steps]
        off = -0.3 + i * 0.6 / max(1, len(systems) - 1)
        points = [(counts.index(row.actors) + off, row.steps) for row in mine if row.steps]
        s = Series.of(LABELS[name], points, kind="points")
        s.notes = [h.fmt_ratio(row.vs) if row.vs else "" for row in mine]
        series.append(s)
    ticks = [(i, f"{n} actor(s)") for i, n in enumerate(counts)]
    ylabel = "transitions / s (median, min–max)"
    title = "DQN post's design vs pararl async"
    return Panel(title, series, ylabel=ylabel, xticks=ticks, logy=True)


def report(r: Results, meta: h.Metadata) -> h.Report:
    p = meta.params
    blocks, panels, ratios = [], [], []
    if r.solve:
        text, solved, curves = compare.report(SOLVE, r.solve, SimpleNamespace(**p))
        blocks += solved
        panels += curves
        ratios.append(f"time to solve (target ≤ 0.5): {text}")
    if r.throughput:
        blocks.append(
            "### Transitions/s: the DQN post's design against pararl async\n\nTransitions stored "
            "per second by the learner process, steady state (the DQN post's memory starts "
            f"full so that it learns every 5 transitions from the start); {p['repeats']} "
            f"interleaved spells of {p['block_s']:g} s after {p['warmup_s']:g} s warm-up. "
            "pararl runs its production learner loop (`OffPolicyLoop`, replay ratio gating; `no "
            "ratio`: replay ratio 0) without evaluation or logging.\n\n"
            + h.table(THROUGHPUT, r.throughput)
        )
        counts = sorted({row.actors for row in r.throughput})
        for n in counts:
            text = ", ".join(
                f"{row.label} {h.fmt_ratio(row.vs)}"
                for row in r.throughput
                if row.actors == n and row.system != "seed_design"
            )
            ratios.append(f"{n} actor(s), transitions/s ÷ seed (target ≥ 100×): {text}")
        panels.append(throughput_panel(r.throughput))
    return h.Report(
        f"DQN: time to solve, throughput against the seed (`{h.PROG} dqn`)",
        "; ".join(ratios),
        blocks,
        panels,
        "DQN benchmark",
    )
