"""`python -m benchmarks sac`: SAC on MuJoCo, pararl (async actors + learner, its
defaults) against SB3's SAC with the same settings, whole processes, interleaved
(HalfCheetah seed 0: pararl, SB3; seed 1: ...).

Both run rl-zoo's MuJoCo SAC settings, read from pararl's config
(`SACConfig.BY_KIND["continuous"]`): 256x256 networks, lr 3e-4, batch 256, tau 0.005,
gamma 0.99, 10k uniformly random steps, then one update per env step, a 1M memory,
the temperature tuned toward -|A|. pararl acts in an actor process while it learns;
SB3 alternates one env step and one update on one env. Each run evaluates its
deterministic policy every `--eval-every` env steps; its final return is the mean of
its last `--final-evals` evaluations. Wall time is launch to exit, and each curve is
put on that clock. Time to reach SB3's final: a pararl run's first evaluation at or
above the median final return of SB3's runs on that env, against SB3's median wall
time. rl-zoo's, CleanRL's and the SAC paper's published 1M-step figures stand beside
(not re-measured).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.lib import harness as h
from benchmarks.lib import sb3, training
from benchmarks.lib.figures import Panel, Series
from benchmarks.lib.stats import censored_median
from benchmarks.lib.training import Run, time_to_reach
from pararl.config.saved import saved_facts

System = Literal["pararl", "sb3"]
LABELS = {"pararl": "pararl SAC (async)", "sb3": "SB3 SAC"}
NEVER = 1e12  # a target return no run reaches: each trains for the whole budget

# Published 1M-step figures, from their own pages. rl-zoo (benchmark.md): v3, one run,
# deterministic evaluation of the final agent; CleanRL (docs, sac_continuous_action):
# v2, training episodic return; the SAC paper (Haarnoja et al. 2018, "Algorithms and
# Applications", as CleanRL's docs read it off its plots): v2, deterministic evaluation.
PUBLISHED: dict[str, dict[str, str]] = {
    "HalfCheetah": {"rl-zoo": "9535 ± 100", "CleanRL": "9635 ± 1424", "SAC paper": "~11,250"},
    "Hopper": {"rl-zoo": "2326 ± 1130", "CleanRL": "2310 ± 343", "SAC paper": "~3,250"},
    "Walker2d": {"rl-zoo": "3863 ± 254", "CleanRL": "3591 ± 911", "SAC paper": "~4,800"},
}
RL_ZOO = {"HalfCheetah": 9535.0, "Hopper": 2326.0, "Walker2d": 3863.0}


@dataclass(frozen=True)
class Config(h.Options):
    runs: tuple[str, ...] = (
        "HalfCheetah-v5:0",
        "HalfCheetah-v5:1",
        "HalfCheetah-v5:2",
        "Hopper-v5:0",
    )
    """ENV:SEED pairs, run in this order, each by every system."""
    systems: tuple[System, ...] = ("pararl", "sb3")
    """Systems to run."""
    budget: int = 300_000
    """Env steps per run."""
    learning_starts: int = 10_000
    """Uniformly random env steps before the first update (both systems)."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor and of each critic (both systems)."""
    eval_every: int = 10_000
    """Env steps between deterministic evaluations."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    final_evals: int = 3
    """The final return is the mean of this many last evaluations."""
    sb3_threads: int = 0
    """Torch threads of the SB3 process (0: torch's default, one per core). Two threads
    beside other work on a 2-core machine ran SB3's update ~10x slower than one."""
    run_timeout_s: float = 4 * 3600.0
    """A run is killed after this long (and reported as failed)."""


QUICK = dict(
    runs=("HalfCheetah-v5:0",),
    budget=3_000,
    learning_starts=1_000,
    eval_every=1_000,
    eval_episodes=1,
    final_evals=1,
    sb3_threads=1,
    run_timeout_s=900.0,
)


def resolve(config: Config) -> Config:
    config = h.apply_quick(config, QUICK)
    h.require(
        config,
        ">= 1: budget eval_every eval_episodes final_evals hidden",
        ">= 0: learning_starts sb3_threads",
        "> 0: run_timeout_s",
    )
    h.check([(not config.systems, "--systems needs at least one value")])
    for run in config.runs:
        env, _, seed = run.rpartition(":")
        h.check([(not env or not seed.isdigit(), f"--runs: '{run}' is not ENV:SEED")])
    return config


def pararl_command(env: str, seed: int, c: Config, run_dir: Path) -> list[str]:
    """`pararl train sac` with its defaults (async with more than one core), the budget,
    the evaluation and the two settings the benchmark states for both systems."""
    return training.train_command(
        "sac", env=env, seed=seed, total_steps=c.budget, learning_starts=c.learning_starts,
        hidden=c.hidden, eval_every=c.eval_every, eval_episodes=c.eval_episodes,
        target_return=NEVER, run_dir=run_dir, progress="plain", tensorboard=False,
    )  # fmt: skip


def run_one(system: str, env: str, seed: int, c: Config, workdir: Path) -> Run:
    """One whole run, launch to exit, its curve on that clock."""
    if system == "sb3":
        flags = {"eval_every": c.eval_every, "eval_episodes": c.eval_episodes}
        net = ",".join(map(str, c.hidden))
        cmd = sb3.command(
            "sac", "curve", env=env, seed=seed, budget=c.budget,
            learning_starts=c.learning_starts, net=net, threads=c.sb3_threads, **flags,
        )  # fmt: skip
        run, result = sb3.curve_run(system, env, seed, "sac", cmd, c.run_timeout_s, workdir)
        own_s = None if result is None else result["train_s"]
    else:
        out = Run.directory(system, env, seed, workdir)
        run, done = Run.of(
            system, env, seed, pararl_command(env, seed, c, out), c.run_timeout_s, workdir
        )
        final = training.parse_final(done.stderr)
        own_s = None if final is None else final["train_s"]
        if run.ok:
            run.note = resolved_note(out)
    training.launch_clock(run.curve, run.wall_s, own_s)
    return run


def resolved_note(run_dir: Path) -> str:
    """What pararl chose for the run: its learner's threads and step mode."""
    resolved = saved_facts(run_dir)
    if not resolved:
        return ""
    threads = resolved.get("learner_threads")
    return f"learner on {threads} thread(s), step {resolved.get('step_mode')}"


@dataclass
class Result:
    config: Config
    runs: list[Run]


def measure(c: Config, meta: h.Metadata) -> Result:
    del meta
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="pararl-bench-sac-") as tmp:
        training.warm_up(Path(tmp))
        for spec in c.runs:
            env, _, seed = spec.rpartition(":")
            for system in c.systems:
                h.progress(f"sac: {system} {env} seed {seed} ...")
                run = run_one(system, env, int(seed), c, Path(tmp))
                runs.append(run)
                final = run.final(c.final_evals)
                shown = "failed" if final is None else f"final {final:.0f}"
                h.progress(f"sac: {system} {env} seed {seed}: {shown}, {run.wall_s:.0f} s")
    return Result(c, runs)


def family(env: str) -> str:
    return env.split("/")[-1].split("-")[0]


@dataclass
class Row:
    """One system on one env over its seeds."""

    env: str
    system: str
    runs: int
    final: h.Summary | None
    wall: h.Summary | None  # launch to exit
    sb3_final: float | None = None  # the median final return of SB3's runs of this env
    reach_s: float | None = None  # median time to reach it (None: median never)
    reached: int = 0
    vs_sb3: float | None = None  # reach_s / SB3's median wall


def rows(runs: list[Run], final_evals: int) -> list[Row]:
    out = []
    for env in dict.fromkeys(r.env for r in runs):
        for system in dict.fromkeys(r.system for r in runs if r.env == env):
            mine = [r for r in runs if r.env == env and r.system == system]
            finals = [f for r in mine if (f := r.final(final_evals)) is not None]
            walls = [r.wall_s for r in mine if r.ok]
            out.append(Row(env, system, len(mine), h.maybe(finals), h.maybe(walls)))
    for row in out:
        sb3_row = next((r for r in out if r.env == row.env and r.system == "sb3"), None)
        if row.system == "sb3" or sb3_row is None or sb3_row.final is None:
            continue
        row.sb3_final = sb3_row.final.median
        mine = [r for r in runs if r.env == row.env and r.system == row.system]
        times = [time_to_reach(r, row.sb3_final) for r in mine]
        row.reached = sum(t != float("inf") for t in times)
        row.reach_s = censored_median(times)
        row.vs_sb3 = h.ratio(row.reach_s, sb3_row.wall)
    return out


def per_s(count: int, r: Run) -> str:
    return h.fmt_rate(count / r.wall_s if r.wall_s and r.ok else None)


def report(result: Result, meta: h.Metadata) -> h.Report:
    del meta
    c, runs = result.config, result.runs
    table_rows = rows(runs, c.final_evals)
    n = c.final_evals

    def whole(v: float) -> str:
        return f"{v:.0f}"

    def best(r: Run) -> float | None:
        return max((p["eval_return"] for p in r.curve), default=None)

    def seeds(r: Row) -> str:
        return "" if r.sb3_final is None else f"{r.reached}/{r.runs}"

    def reach(r: Row) -> str:
        if r.system == "sb3" or r.sb3_final is None:
            return ""
        return h.fmt_num(r.reach_s, 0) if r.reach_s is not None else "not reached"

    cols: list[h.Col[Row]] = [
        h.Col("env", lambda r: r.env, "l"),
        h.Col("system", lambda r: LABELS.get(r.system, r.system), "l"),
        h.Col("runs", lambda r: r.runs),
        h.Col(f"final (last {n} evals), median (min–max)", lambda r: h.fmt_spread(r.final, whole)),
        h.Col("wall s, launch to exit", lambda r: h.fmt_spread(r.wall, whole)),
        h.Col("time to reach SB3's final (s)", reach),
        h.Col("seeds reaching it", seeds),
        h.Col("÷ SB3 wall (target ≤ 0.5)", lambda r: h.fmt_ratio(r.vs_sb3)),
    ]  # fmt: skip
    run_cols: list[h.Col[Run]] = [
        h.Col("env", lambda r: r.env, "l"),
        h.Col("system", lambda r: LABELS.get(r.system, r.system), "l"),
        h.Col("seed", lambda r: r.seed),
        h.Col("final", lambda r: h.fmt_num(r.final(n), 0)),
        h.Col("best eval", lambda r: h.fmt_num(best(r), 0)),
        h.Col("wall (s)", lambda r: h.fmt_num(r.wall_s, 0)),
        h.Col("env steps/s", lambda r: per_s(r.env_steps, r)),
        h.Col("updates/s", lambda r: per_s(r.updates, r)),
        h.Col("updates", lambda r: f"{r.updates:,}"),
        h.Col("note", lambda r: r.note[-80:], "l"),
    ]  # fmt: skip
    notes = (
        f"Budget {c.budget:,} env steps per run; deterministic evaluation every "
        f"{c.eval_every:,} steps ({c.eval_episodes} episodes); final return: the mean of the "
        f"last {n} evaluations. Both systems: rl-zoo's MuJoCo SAC settings from pararl's "
        f"config (networks {'x'.join(map(str, c.hidden))}, lr 3e-4, batch 256, tau 0.005, "
        f"gamma 0.99, {c.learning_starts:,} random steps, one update per env step, temperature "
        "tuned toward -|A| from 1). pararl: `pararl train sac` with its defaults (async: one "
        "actor process, 4 envs; the learner's threads and step mode are in each run's "
        "note); SB3: `SAC('MlpPolicy')` on one "
        f"env, {sb3_threads(c)}. Wall times are launch to exit; the curves are on that "
        "clock. Env steps/s and updates/s: the run's totals over its wall time. Runs in the "
        "order run."
    )
    blocks = [
        "### SAC on MuJoCo against SB3 at the same budget\n\n" + notes + "\n\n"
        + h.table(cols, table_rows) + "\n\nRuns, in the order run:\n\n" + h.table(run_cols, runs)
    ]  # fmt: skip
    published = [
        [f, *PUBLISHED[f].values()]
        for f in dict.fromkeys(family(r.env) for r in runs)
        if f in PUBLISHED
    ]
    if published:
        heads = ("env", "rl-zoo (v3, 1 run)", "CleanRL (v2, 3 seeds)", "SAC paper (v2)")
        blocks.append(
            "Published 1M-step figures (their own pages; not re-measured; older MuJoCo "
            "versions; CleanRL's is the training episodes' return, the others deterministic "
            "evaluations):\n\n" + h.text_table(heads, published)
        )
    return h.Report(
        "SAC on MuJoCo against SB3 (`python -m benchmarks sac`)",
        ratios(table_rows),
        blocks,
        panels(runs, c),
        figure_alt="SAC MuJoCo benchmark",
    )


def sb3_threads(c: Config) -> str:
    if c.sb3_threads == 0:
        return "torch's default threads (one per core)"
    return f"{c.sb3_threads} torch thread{'s' if c.sb3_threads > 1 else ''}"


def panels(runs: list[Run], c: Config) -> list[Panel]:
    out = []
    for env in dict.fromkeys(r.env for r in runs):
        for axis, label in (
            ("env_steps", "env steps"),
            ("wall_s", "wall time, launch to exit (s)"),
        ):
            series = [
                Series(
                    f"{LABELS.get(r.system, r.system)} s{r.seed}",
                    [p[axis] for p in r.curve],
                    [p["eval_return"] for p in r.curve],
                    fmt="-",
                    color="C0" if r.system == "pararl" else "C1",
                )
                for r in runs
                if r.env == env and r.curve
            ]
            f = family(env)
            hlines: list[tuple[float, str, str | None]] = (
                [(RL_ZOO[f], ":", "rl-zoo at 1M (v3)")] if f in RL_ZOO else []
            )
            title = f"{env}: return vs {label.split(',')[0]} ({c.budget:,} steps)"
            out.append(Panel(title, series, label, "eval return", hlines=hlines))
    return out


def ratios(table_rows: list[Row]) -> str:
    parts = []
    for env in dict.fromkeys(r.env for r in table_rows):
        mine = {r.system: r for r in table_rows if r.env == env}
        ours, theirs = mine.get("pararl"), mine.get("sb3")
        text = f"{env}: pararl final {h.fmt_num(h.med(ours.final) if ours else None, 0)}"
        if theirs is not None:
            text += f" vs SB3 {h.fmt_num(h.med(theirs.final), 0)}"
            walls = h.ratio(h.med(ours.wall) if ours else None, h.med(theirs.wall))
            text += f", wall ÷ SB3 {h.fmt_ratio(walls)}"
        if ours is not None and ours.sb3_final is not None:
            reach = h.fmt_ratio(ours.vs_sb3) if ours.vs_sb3 is not None else "not reached"
            text += f", SB3's final reached in {reach} SB3's wall time (target ≤ 0.5×)"
        if ours is not None:
            text += f", median of {ours.runs} seed(s)"
        parts.append(text)
    return "; ".join(parts)
