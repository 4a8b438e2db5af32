"""Time to solve CartPole-v1 (the `solve` part of `dqn` and `ppo`): whole training
processes (`lib.training`), timed from launch to exit, start-up included.

A system is `pararl train ALGO` (`pararl`: its defaults, `pararl-MODE`: `--mode MODE`)
or the SB3 anchor (`lib.sb3`). A run stops at its own periodic greedy evaluation
reaching the target, or at the step budget; afterwards, untimed, its saved policy is
checked on more episodes. Solved = stopped on the target *and* the check agrees.
"""

from __future__ import annotations

import functools
import math
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.lib import harness as h
from benchmarks.lib import sb3, training
from benchmarks.lib.figures import Panel, Series

Algo = Literal["dqn", "ppo"]
AVERAGING_REPLICAS = 2  # `--mode averaging --workers 2`, whatever the machine


@dataclass(frozen=True)
class SolveOptions:
    """The time-to-solve part's options (dqn, ppo)."""

    seeds: tuple[int, ...] = (0, 1, 2)
    """solve: training seeds; every system runs once per seed."""
    budget: int = 100_000
    """solve: env steps at most per run."""
    target: float = 475.0
    """solve: mean greedy return that counts as solved."""
    eval_every: int = 5_000
    """solve: env steps between greedy evaluations."""
    eval_episodes: int = 10
    """solve: episodes per evaluation."""
    verify_episodes: int = 20
    """solve: episodes of the untimed check of each run's saved policy."""
    run_timeout_s: float = 1800.0
    """solve: one training process is killed after this long (counted not solved)."""


QUICK = {"seeds": (0,), "eval_episodes": 5, "verify_episodes": 5, "run_timeout_s": 120.0}


def check(o: SolveOptions) -> None:
    rules = ">= 1: budget eval_every eval_episodes verify_episodes", "> 0: run_timeout_s"
    h.require(o, ">= 0: seeds systems", *rules)


def train_command(system: str, seed: int, out: Path, o: SolveOptions, algo: Algo) -> list[str]:
    """The training process of `system`; it writes its run into `out`."""
    every = {"eval_every": o.eval_every, "eval_episodes": o.eval_episodes}
    if system == "sb3":
        budget = {"budget": o.budget, "target": o.target}
        return sb3.command(algo, "train", seed=seed, **budget, **every, save=out / "model.zip")
    mode: dict[str, object] = {}
    if system != "pararl":
        mode["mode"] = system.removeprefix("pararl-")
    if system == "pararl-averaging":
        mode["workers"] = AVERAGING_REPLICAS
    return training.train_command(
        algo, env="CartPole-v1", **mode, seed=seed, run_dir=out, progress="plain",
        total_steps=o.budget, target_return=o.target, **every,
    )  # fmt: skip


def verify_command(system: str, out: Path, o: SolveOptions, algo: Algo) -> list[str]:
    if system == "sb3":
        return sb3.command(algo, "verify", str(out / "model.zip"), episodes=o.verify_episodes)
    return training.evaluate_command(out, o.verify_episodes)


@dataclass
class SolveRun:
    """One training process and its check."""

    system: str
    label: str
    seed: int
    wall_s: float  # launch to exit
    returncode: int
    status: str = "failed"  # the trainer's own word: solved, step budget reached, ...
    solved: bool = False  # stopped on the target and the check agrees
    env_steps: int | None = None
    train_s: float | None = None  # the trainer's own clock
    best_eval: float | None = None
    verify_mean: float | None = None
    note: str = ""


def run_one(
    system: str, label: str, seed: int, o: SolveOptions, algo: Algo, workdir: Path
) -> SolveRun:
    """Train once (timed), then check the result (untimed)."""
    out = workdir / f"{system}-seed{seed}"
    done = training.run_process(train_command(system, seed, out, o, algo), o.run_timeout_s, workdir)
    anchor = system == "sb3"
    parsed = sb3.parse(done.stdout, algo) if anchor else training.parse_final(done.stderr)
    run = SolveRun(system, label, seed, done.wall_s, done.returncode)
    if done.timed_out or parsed is None or done.returncode != 0:
        timeout = f"killed after {o.run_timeout_s:g} s"
        run.status, run.note = ("timeout", timeout) if done.timed_out else ("failed", done.tail)
        return run
    if anchor:
        parsed["status"] = "solved" if parsed["solved"] else "step budget reached"
    run.status, run.env_steps, run.train_s = (
        parsed["status"],
        parsed["env_steps"],
        parsed["train_s"],
    )
    run.best_eval = parsed["best_eval"]
    check = training.run_process(verify_command(system, out, o, algo), 300.0, workdir)
    if anchor:
        verified = sb3.parse(check.stdout, algo)
    else:
        verified = {"mean": training.parse_evaluate(check.stdout)}
    run.verify_mean = None if verified is None else verified["mean"]
    run.note = "" if run.verify_mean is not None else f"check failed ({check.tail})"
    run.solved = run.status == "solved" and (run.verify_mean or -math.inf) >= o.target
    return run


@dataclass
class SolveRow:
    """One system over its seeds."""

    system: str
    label: str
    runs: int
    solved: int
    time_to_solve_s: float | None  # median, an unsolved run counting as never
    solved_wall: h.Summary | None
    wall_median_all: float | None
    env_steps_median: float | None  # of the solved runs
    vs_sb3: float | None = None


@dataclass
class SolveResult:
    systems: list[SolveRow]
    runs: list[SolveRun]


def measure(
    systems: Sequence[str], o: SolveOptions, algo: Algo, labels: Mapping[str, str]
) -> SolveResult:
    """Every system once per seed, interleaved (seed 0: A B C, seed 1: A B C, ...)."""
    runs: list[SolveRun] = []

    def one(system: str, workdir: Path) -> float:
        seed = o.seeds[sum(r.system == system for r in runs)]
        h.progress(f"solve: {system} seed {seed} ...")
        runs.append(run := run_one(system, labels[system], seed, o, algo, workdir))
        how = "solved" if run.solved else f"not solved ({run.status})"
        h.progress(f"solve: {system} seed {seed}: {how}, {run.wall_s:.1f} s, {run.env_steps} env")
        return run.wall_s

    with tempfile.TemporaryDirectory(prefix=f"pararl-bench-{algo}-") as tmp:
        training.warm_up(Path(tmp))
        h.interleaved({s: functools.partial(one, s, Path(tmp)) for s in systems}, len(o.seeds))
    rows = []
    for system in systems:
        mine = [r for r in runs if r.system == system]
        solved, walls = [r for r in mine if r.solved], [r.wall_s for r in mine]
        steps = [r.env_steps for r in solved if r.env_steps is not None]
        censored = statistics.median(r.wall_s if r.solved else math.inf for r in mine)
        rows.append(
            SolveRow(
                system,
                labels[system],
                len(mine),
                len(solved),
                None if math.isinf(censored) else censored,
                h.maybe([r.wall_s for r in solved]),
                statistics.median(walls),
                statistics.median(steps) if steps else None,
            )
        )
    sb3 = next((r.time_to_solve_s for r in rows if r.system == "sb3"), None)
    for row in rows:
        row.vs_sb3 = h.ratio(row.time_to_solve_s, sb3)
    return SolveResult(rows, runs)


def ratios_text(result: SolveResult) -> str:
    """`label 0.39×, ...` for every pararl system (`not solved` where it did not)."""
    return ", ".join(
        f"{r.label} {'not solved' if r.vs_sb3 is None else h.fmt_ratio(r.vs_sb3)}"
        for r in result.systems
        if r.system != "sb3"
    )


SUMMARY: list[h.Col[SolveRow]] = [
    h.Col("system", lambda r: r.label, "l"),
    h.Col("solved", lambda r: f"{r.solved}/{r.runs}", "c"),
    h.Col(
        "time to solve, median (s)",
        lambda r: h.fmt_num(r.time_to_solve_s).replace("–", "not solved"),
    ),
    h.Col("solved runs min–max (s)", lambda r: h.fmt_range(r.solved_wall, h.fmt_num)),
    h.Col("median wall, all runs (s)", lambda r: h.fmt_num(r.wall_median_all)),
    h.Col("env steps (median, solved)", lambda r: h.fmt_num(r.env_steps_median, 0)),
    h.Col("vs SB3", lambda r: h.fmt_ratio(r.vs_sb3)),
]
RUNS: list[h.Col[SolveRun]] = [
    h.Col("system", lambda r: r.label, "l"),
    h.Col("seed", lambda r: r.seed),
    h.Col("wall (s)", lambda r: h.fmt_num(r.wall_s)),
    h.Col("trainer says", lambda r: r.status + (f" ({r.note})" if r.note else ""), "l"),
    h.Col("env steps", lambda r: "–" if r.env_steps is None else f"{r.env_steps:,}"),
    h.Col("check mean", lambda r: h.fmt_num(r.verify_mean)),
    h.Col("solved", lambda r: "yes" if r.solved else "no", "c"),
]


def block(result: SolveResult, p: Mapping[str, Any]) -> str:
    notes = (
        f"Whole processes, launch to exit (start-up included), budget {p['budget']:,} env "
        f"steps, stop when the greedy evaluation ({p['eval_episodes']} episodes every "
        f"{p['eval_every']:,} steps) reaches {p['target']:g}; solved = stopped on the target "
        f"and a {p['verify_episodes']}-episode check of the saved policy reaches it too. An "
        "unsolved run counts as never solved in the median."
    )
    return (
        f"### Time to solve CartPole-v1\n\n{notes}\n\n{h.table(SUMMARY, result.systems)}\n\n"
        f"Runs, in the order run:\n\n{h.table(RUNS, result.runs)}"
    )


def panel(result: SolveResult) -> Panel:
    """Every run's wall time (o solved, x not), a bar at each system's median."""
    x = {row.system: i for i, row in enumerate(result.systems)}
    series = [
        Series(None, [x[r.system] for r in runs], [r.wall_s for r in runs], "points", fmt, color)
        for runs, fmt, color in (
            ([r for r in result.runs if r.solved], "o", "C0"),
            ([r for r in result.runs if not r.solved], "x", "C3"),
        )
    ]
    medians = [(x[r.system], r.time_to_solve_s) for r in result.systems if r.time_to_solve_s]
    if medians:
        xs, ys = zip(*medians, strict=True)
        series.append(Series(None, xs, ys, "points", "_k", size=30))
    top = max((r.wall_s for r in result.runs), default=1.0)
    ticks = [(i, row.label) for i, row in enumerate(result.systems)]
    title, ylabel = "CartPole-v1: o solved, x not; bar: median", "wall time, launch to exit (s)"
    return Panel(
        title, series, ylabel=ylabel, xticks=ticks, ylim=(0, 1.1 * top), legend=False, xrotation=20
    )
