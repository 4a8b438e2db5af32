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
put on that clock. Time to reach SB3's final, per seed: a pararl run's first
evaluation at or above the final return of SB3's run of the same env and seed, and
that time divided by the SB3 run's wall time; the table gives the medians over seeds.
rl-zoo's, CleanRL's and the SAC paper's published 1M-step figures stand beside (not
re-measured).

An env and seed takes about two hours on two cores (both systems), so each one whose
runs all ended is kept in the repository (`results/sac/ENV-seedSEED.json`: the runs,
the settings, and when, where and at which commit they ran). A later invocation with
the same settings reads it instead of running it again: the default three HalfCheetah
seeds and Hopper can be run in different sittings, and the table covers all of them.
Both systems of one seed always run in the same sitting, since only times measured
together compare.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

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
    keep_dir: Path | None = None
    """Folder where each ENV:SEED whose runs all ended is kept (ENV-seedSEED.json), and
    read back instead of run again by an invocation with the same settings; default:
    <repo>/results/sac (with --quick, nothing is kept unless a folder is given)."""
    fresh: bool = False
    """Run every ENV:SEED again, also one that is kept (the kept file is replaced once
    the new runs end)."""


# the options a kept ENV:SEED must share with the invocation that reads it
KEPT_SETTINGS = (
    "systems", "budget", "learning_starts", "hidden", "eval_every", "eval_episodes",
    "sb3_threads",
)  # fmt: skip


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
    if config.keep_dir is None and not config.quick:
        config = dataclasses.replace(config, keep_dir=h.ROOT / "results" / "sac")
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
    sittings: dict[str, str] = dataclasses.field(default_factory=dict)  # ENV:SEED -> when, where


def settings(c: Config) -> dict[str, Any]:
    """The options a kept ENV:SEED was run with, as JSON has them."""
    return json.loads(json.dumps({name: getattr(c, name) for name in KEPT_SETTINGS}))


def sitting(meta: h.Metadata) -> str:
    dirty = " (with uncommitted changes)" if meta.git_dirty else ""
    return f"{meta.date[:10]}, commit {meta.git_commit}{dirty}, {meta.physical_cores} cores"


@dataclass
class Kept:
    """One ENV:SEED's runs, every system's, from one sitting (`results/sac/*.json`)."""

    settings: dict[str, Any]
    sitting: str
    runs: list[Run]

    @staticmethod
    def path(directory: Path, env: str, seed: int) -> Path:
        return directory / f"{env.replace('/', '_')}-seed{seed}.json"

    @classmethod
    def load(cls, path: Path) -> Kept | None:
        """The kept runs, or None when there are none or the file cannot be read."""
        try:
            data = json.loads(path.read_text())
            runs = [Run(**run) for run in data["runs"]]
            return cls(data["settings"], data["sitting"], runs)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self, path: Path) -> None:
        h.write_atomic(path, json.dumps(dataclasses.asdict(self), indent=1) + "\n")


def kept_runs(c: Config, env: str, seed: int) -> tuple[Kept | None, bool]:
    """The runs kept for ENV:SEED with this invocation's settings (None: run them), and
    whether new runs may be kept in their place: never over runs kept with other
    settings, which this invocation does not replace."""
    if c.keep_dir is None:
        return None, False
    path = Kept.path(c.keep_dir, env, seed)
    kept, mine = Kept.load(path), settings(c)
    if kept is None:
        if path.exists():
            h.progress(f"sac: {path} cannot be read; {env} seed {seed} is run again")
        return None, True
    if kept.settings != mine:
        other = {k: v for k, v in kept.settings.items() if mine.get(k) != v}
        h.progress(
            f"sac: {path} was run with other settings ({other}); {env} seed {seed} is run "
            "again, and that file is left as it is"
        )
        return None, False
    if c.fresh:
        return None, True
    return kept, False


def measure(c: Config, meta: h.Metadata) -> Result:
    result = Result(c, [])
    warmed = False
    with tempfile.TemporaryDirectory(prefix="pararl-bench-sac-") as tmp:
        for spec in c.runs:
            env, _, seed_text = spec.rpartition(":")
            seed = int(seed_text)
            key = f"{env}:{seed}"  # as `report` looks a run's sitting up
            kept, may_keep = kept_runs(c, env, seed)
            if kept is not None:
                h.progress(f"sac: {env} seed {seed}: kept ({kept.sitting}), not run again")
                result.runs += kept.runs
                result.sittings[key] = kept.sitting
                continue
            if not warmed:
                training.warm_up(Path(tmp))
                warmed = True
            pair = []
            for system in c.systems:
                h.progress(f"sac: {system} {env} seed {seed} ...")
                run = run_one(system, env, seed, c, Path(tmp))
                pair.append(run)
                final = run.final(c.final_evals)
                shown = "failed" if final is None else f"final {final:.0f}"
                h.progress(f"sac: {system} {env} seed {seed}: {shown}, {run.wall_s:.0f} s")
            result.runs += pair
            result.sittings[key] = sitting(meta)
            if may_keep and c.keep_dir is not None and all(r.ok for r in pair):
                path = Kept.path(c.keep_dir, env, seed)
                Kept(settings(c), sitting(meta), pair).save(path)
                h.progress(f"sac: {env} seed {seed} kept in {path}")
    return result


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
    reach_s: float | None = None  # median over seeds of the time to reach its SB3's final
    reached: int = 0
    paired: int = 0  # seeds with an SB3 run to compare with
    vs_sb3: float | None = None  # median over seeds of that time / its SB3 run's wall


def paired_reach(runs: list[Run], run: Run, final_evals: int) -> tuple[float, float] | None:
    """When `run` first reached the final return of SB3's run of its env and seed, and
    that time over the SB3 run's wall time (inf when never); None without that run."""
    sb3_run = next(
        (r for r in runs if r.system == "sb3" and (r.env, r.seed) == (run.env, run.seed)), None
    )
    if sb3_run is None or not sb3_run.ok or (target := sb3_run.final(final_evals)) is None:
        return None
    reach = time_to_reach(run, target)
    return reach, reach / sb3_run.wall_s


def rows(runs: list[Run], final_evals: int) -> list[Row]:
    out = []
    for env in dict.fromkeys(r.env for r in runs):
        for system in dict.fromkeys(r.system for r in runs if r.env == env):
            mine = [r for r in runs if r.env == env and r.system == system]
            finals = [f for r in mine if (f := r.final(final_evals)) is not None]
            walls = [r.wall_s for r in mine if r.ok]
            row = Row(env, system, len(mine), h.maybe(finals), h.maybe(walls))
            out.append(row)
            if system == "sb3":
                continue
            sb3_finals = [
                f
                for r in runs
                if r.env == env and r.system == "sb3" and (f := r.final(final_evals)) is not None
            ]
            row.sb3_final = h.med(h.maybe(sb3_finals))
            pairs = [p for r in mine if (p := paired_reach(runs, r, final_evals)) is not None]
            row.paired = len(pairs)
            row.reached = sum(reach != float("inf") for reach, _ in pairs)
            row.reach_s = censored_median([reach for reach, _ in pairs])
            row.vs_sb3 = censored_median([share for _, share in pairs])
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
        return "" if r.sb3_final is None else f"{r.reached}/{r.paired}"

    def ran(r: Run) -> str:
        return result.sittings.get(f"{r.env}:{r.seed}", "")

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
        h.Col("time to reach its seed's SB3 final (s), median", reach),
        h.Col("seeds reaching it", seeds),
        h.Col("÷ that SB3 run's wall, median (target ≤ 0.5)", lambda r: h.fmt_ratio(r.vs_sb3)),
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
        h.Col("ran", ran, "l"),
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
        "clock. Env steps/s and updates/s: the run's totals over its wall time. Time to "
        "reach SB3's final, per seed: pararl's first evaluation at or above the final of "
        "SB3's run of the same seed, and its ratio to that run's wall time (both systems of "
        "a seed run in one sitting, one after the other); medians over seeds. Runs in the "
        "order of `--runs`; `ran`: the sitting (a seed kept from an earlier one is read "
        "back, not run again)."
    )
    blocks = [
        "### SAC on MuJoCo against SB3 at the same budget\n\n" + notes + "\n\n"
        + h.table(cols, table_rows) + "\n\nRuns:\n\n" + h.table(run_cols, runs)
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
