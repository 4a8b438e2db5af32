"""The one learning comparison: pararl and its SB3 anchor trained at a budget on each
ENV:SEED, whole processes interleaved; finals, wall times and ratios (time to the
anchor's final, or to solve). A benchmark states it as a `Comparison` of `System`s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import re
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.lib import harness as h
from benchmarks.lib import sb3, training
from benchmarks.lib.figures import Panel, Series
from benchmarks.lib.stats import censored_median

NEVER = 10**12  # a step count or return no run reaches: the whole budget, no evaluation


@dataclass(frozen=True)
class System:
    """pararl (`pararl train ALGO` with `flags`) or an anchor (SB3's `algo` as
    `lib.sb3.ANCHORS[anchor]` runs it, `flags` over its settings); a pararl system is
    held against the first anchor of its algorithm."""

    name: str
    label: str
    algo: str
    flags: Mapping[str, object] = field(default_factory=dict)
    anchor: str = ""
    default: bool = True  # run unless --systems says otherwise
    color: str | None = None


# a row's --quick run: one ENV:SEED (the row gives it) at a budget of a few rollouts
QUICK_RUN: dict[str, Any] = dict(
    budget=2_048, eval_every=1_024, eval_episodes=2, final_evals=1, run_timeout_s=300.0
)


@dataclass(frozen=True)
class Comparison:
    """A row: its systems, ENV:SEED runs, budget and evaluations, what it is held against."""

    name: str
    title: str
    systems: tuple[System, ...]
    runs: tuple[str, ...]
    budget: int
    eval_every: int
    eval_episodes: int = 10
    budgets: Mapping[str, int] = field(default_factory=dict)  # an env's own, not `budget`
    final_evals: int = 3
    target: float | None = None  # time to solve: each run stops at its first evaluation here
    reach: float = 0.5  # the target of the time to reach the anchor's final, ÷ its wall
    verify_episodes: int = 20  # with a target: the untimed check of the saved policy
    run_timeout_s: float = 7_200.0
    anchor_envs: tuple[str, ...] = ()  # the envs an anchor runs on (empty: every env)
    anchor_seeds: tuple[int, ...] = ()  # the seeds an anchor runs (empty: every seed)
    keep_dir: str = ""  # kept ENV:SEEDs, under the checkout (empty: none kept)
    kept: tuple[str, ...] = ()  # the benchmark's own options a kept ENV:SEED shares
    quick: Mapping[str, object] = field(default_factory=dict)  # Options' --quick values
    notes: str = ""  # the settings, in words
    published: tuple[str, ...] = ()  # the published table's heads: "env", then sources
    figures: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # env family: row
    lines: Mapping[str, tuple[float, str]] = field(default_factory=dict)  # family: y, label
    published_note: str = ""
    extras: Mapping[str, str] = field(default_factory=dict)  # what `after` adds: key, words

    def system(self, name: str) -> System:
        return next(s for s in self.systems if s.name == name)

    def budget_of(self, c: Any, env: str) -> int:
        """A run's env steps on `env`: its own (`budgets`) under the table's budget, else `c`'s."""
        return self.budgets.get(env, c.budget) if c.budget == self.budget else int(c.budget)

    def anchor_of(self, s: System) -> System | None:
        """The anchor `s` is held against (None: an anchor itself, or none here)."""
        anchors = [a for a in self.systems if a.anchor]
        if s.anchor or not anchors:
            return None
        return next((a for a in anchors if a.algo == s.algo), anchors[0])


@dataclass(frozen=True)
class Options:
    """The options of a comparison (each default: its table's)."""

    runs: tuple[str, ...] = ()  # ENV:SEED pairs, in this order, each run by every system.
    systems: tuple[str, ...] = ()  # Systems to run.
    budget: int | None = None  # Env steps per run on every env (default: with the envs' own).
    eval_every: int | None = None  # Env steps between deterministic evaluations.
    eval_episodes: int | None = None  # Episodes per evaluation.
    final_evals: int | None = None  # The final return: the mean of this many last evaluations.
    run_timeout_s: float | None = None  # A run is killed after this long (reported as failed).
    verify_episodes: int | None = None  # With a target: episodes checking a solved run's policy.
    sb3_threads: int = 0
    """Torch threads of the SB3 process (0: torch's default; --quick: 1; two beside other
    work on 2 cores ran SB3's SAC update ~10x slower than one)."""
    keep_dir: Path | None = None
    """Folder where each ENV:SEED whose runs all ended is kept and read back by a run with
    the same settings, not run again (--quick: none)."""
    fresh: bool = False  # Run every ENV:SEED again, also one that is kept (its file replaced).


TABLE = ("runs", "systems", "budget", "eval_every", "eval_episodes", "final_evals",
         "run_timeout_s", "verify_episodes")  # fmt: skip


def resolve(row: Comparison, config: Any) -> Any:
    """`config` (an `Options`) with --quick's values and the table's for every option left
    at its default (the `c` the functions below take); bad options raise UsageError."""
    quick = getattr(config, "quick", False)
    changes: dict[str, Any] = dict(row.quick) if quick else {}
    if quick and not config.sb3_threads:
        changes["sb3_threads"] = 1
    for name in TABLE:
        if getattr(config, name) in ((), None):
            table = tuple(s.name for s in row.systems if s.default) if name == "systems" else None
            changes.setdefault(name, table or getattr(row, name))
        else:
            changes.pop(name, None)
    if config.keep_dir is None and row.keep_dir and not quick:
        changes["keep_dir"] = h.ROOT / row.keep_dir
    c = dataclasses.replace(config, **changes)
    h.require(c, ">= 1: budget eval_every eval_episodes final_evals verify_episodes")
    h.require(c, "> 0: run_timeout_s", ">= 0: sb3_threads")
    known = [s.name for s in row.systems]
    h.check([(n not in known, f"--systems: '{n}' is not one of {', '.join(known)}")
             for n in c.systems])  # fmt: skip
    h.check([(not r.rpartition(":")[0] or not r.rpartition(":")[2].isdigit(),
              f"--runs: '{r}' is not ENV:SEED") for r in c.runs])  # fmt: skip
    return c


# --- one run ----------------------------------------------------------------------------


@dataclass
class Run:
    """A whole run of one system on one ENV:SEED: launch to exit, its curve on that clock."""

    system: str
    env: str
    seed: int
    wall_s: float
    ok: bool
    env_steps: int = 0
    updates: int = 0
    curve: list[dict[str, float]] = field(default_factory=list)  # env_steps, wall_s, return
    note: str = ""
    status: str = ""  # the trainer's own word: solved, step budget reached, failed, ...
    train_return: float | None = None  # the mean of its last 20 training episodes
    check: float | None = None  # the untimed check of its saved policy (a target's)
    train_s: float | None = None  # its own clock, as its last line says
    extra: dict[str, Any] = field(default_factory=dict)  # what a benchmark adds (`after`)
    flags: dict[str, Any] = field(default_factory=dict)  # its system's, as JSON has them
    sitting: str = ""  # when, on what code and machine it ran (`sitting`)

    def final(self, last: int) -> float | None:
        returns = [p["eval_return"] for p in self.curve[-last:]]
        return statistics.fmean(returns) if returns else None

    def best(self) -> float | None:
        return max((p["eval_return"] for p in self.curve), default=None)


def time_to_reach(run: Run, target: float) -> float:
    """Wall s of the run's first evaluation at `target` or above (inf: none). Returns
    equal but for float rounding count as reached: a mean of ten episodes of 1.0 is
    0.9999999999999998 summed one way and 1.0 another."""
    at = target - 1e-9 * max(1.0, abs(target))
    return next((p["wall_s"] for p in run.curve if p["eval_return"] >= at), math.inf)


def file_name(env: str) -> str:
    """`env` in a file name: its `/` and a `module:` prefix's `:` (which Windows refuses
    in names) as `_`."""
    return env.replace("/", "_").replace(":", "_")


def directory(workdir: Path, system: str, env: str, seed: int) -> Path:
    return workdir / f"{system}-{file_name(env)}-{seed}"


def pararl_command(row: Comparison, c: Any, s: System, env: str, seed: int, out: Path) -> list[str]:
    """`pararl train ALGO` of `s` on ENV:SEED into `out`: the budget, the evaluations,
    the target (NEVER: none) and `s.flags`."""
    flags: dict[str, object] = {
        "env": env, "seed": seed, "total_steps": row.budget_of(c, env), "eval_every": c.eval_every,
        "eval_episodes": c.eval_episodes, "target_return": row.target or NEVER,
        "run_dir": out, "progress": "plain", "tensorboard": False, **s.flags,
    }  # fmt: skip
    return training.train_command(s.algo, **flags)


def anchor_command(row: Comparison, c: Any, s: System, env: str, seed: int, out: Path) -> list[str]:
    """The SB3 anchor `s` on ENV:SEED (`lib.sb3 ALGO learn`), its model saved in `out`."""
    every = 0 if c.eval_every >= NEVER else c.eval_every
    settings = [f"{k}={json.dumps(v)}" for k, v in s.flags.items()]
    return sb3.command(
        s.algo, "learn", anchor=s.anchor, env=env, seed=seed, budget=row.budget_of(c, env),
        eval_every=every, eval_episodes=c.eval_episodes, target=row.target,
        save=out / "model.zip", threads=c.sb3_threads or None, set=settings or None,
    )  # fmt: skip


def read_anchor(run: Run, s: System, done: training.Finished) -> float | None:
    """What an anchor's result line says of its run; its own clock (None: no line)."""
    result = sb3.parse(done.stdout, s.algo)
    if result is None:
        run.ok = False
        return None
    run.curve, run.env_steps, run.updates = result["curve"], result["env_steps"], result["updates"]
    run.status, run.train_return = result["status"], result["train_return"]
    return float(result["train_s"])


def read_pararl(run: Run, out: Path, done: training.Finished) -> float | None:
    """What a pararl run left (its run directory, its last line), and its own clock; an
    off-policy run's learner threads and step mode in its note."""
    from pararl.config.saved import saved_facts

    rows = training.read_metrics(out)
    run.curve = training.evaluations(training.read_metrics(out, "eval.csv"))
    run.env_steps, run.updates = training.totals(rows)
    returns = [float(r["episode_return"]) for r in rows if r.get("episode_return")]
    run.train_return = returns[-1] if returns else None  # its last mean of 20 episodes
    facts = saved_facts(out) if run.ok else {}
    if facts.get("learner_threads") is not None:
        run.note = f"learner on {facts['learner_threads']} thread(s), step {facts.get('step_mode')}"
    final = training.parse_final(done.stderr)
    if final is None:
        return None
    run.status, run.env_steps = final["status"], run.env_steps or final["env_steps"]
    return float(final["train_s"])


def run_one(row: Comparison, c: Any, s: System, env: str, seed: int, workdir: Path) -> Run:
    """One whole run of `s`, launch to exit; with a target, its saved policy checked after."""
    out = directory(workdir, s.name, env, seed)
    if s.anchor:  # pararl makes its own run directory
        out.mkdir(parents=True, exist_ok=True)
    command = anchor_command if s.anchor else pararl_command
    done = training.run_process(command(row, c, s, env, seed, out), c.run_timeout_s, workdir)
    run = Run(s.name, env, seed, done.wall_s, done.returncode == 0, flags=as_json(s.flags))
    run.train_s = read_anchor(run, s, done) if s.anchor else read_pararl(run, out, done)
    if not run.ok:
        run.status, run.note = ("timeout" if done.timed_out else "failed"), done.tail
    # each system's clock starts at its own point of its start-up: what its process
    # spent outside it (imports, building, shutting down) is added to every point
    offset = 0.0 if run.train_s is None else max(run.wall_s - run.train_s, 0.0)
    for point in run.curve:
        point["wall_s"] = round(point["wall_s"] + offset, 3)
    if row.target is not None and run.status == "solved":
        run.check = check(s, env, out, c.verify_episodes, workdir)
        run.note = run.note if run.check is not None else "the check of its saved policy failed"
    return run


def check(s: System, env: str, out: Path, episodes: int, workdir: Path) -> float | None:
    """The mean greedy return of a run's saved policy over `episodes` episodes."""
    if s.anchor:
        cmd = sb3.command(s.algo, "verify", str(out / "model.zip"), anchor=s.anchor, env=env,
                          episodes=episodes)  # fmt: skip
        result = sb3.parse(training.run_process(cmd, 300.0, workdir).stdout, s.algo)
        return None if result is None else float(result["mean"])
    done = training.run_process(training.evaluate_command(out, episodes), 300.0, workdir)
    return training.parse_evaluate(done.stdout)


def solved(row: Comparison, run: Run) -> bool:
    """Stopped on the target, and the check of its saved policy agrees."""
    target = row.target if row.target is not None else math.inf
    return run.status == "solved" and (run.check if run.check is not None else -math.inf) >= target


# --- every run of a comparison ----------------------------------------------------------


@dataclass
class Outcome:
    """A comparison's runs, in the order run (kept ones where they are read back)."""

    name: str
    runs: list[Run]


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def settings(row: Comparison, c: Any) -> dict[str, Any]:
    """What the kept runs of an ENV:SEED share (read back only by a run with the same),
    as JSON has it: the budget (and the envs' own), the evaluations and `row.kept`; each
    run keeps its own system's flags."""
    names = ("budget", "eval_every", "eval_episodes", *row.kept)
    mine = {name: getattr(c, name) for name in names}
    if row.budgets:
        mine["budgets"] = {env: row.budget_of(c, env) for env in row.budgets}
    return as_json(mine)


def sitting(meta: h.Metadata) -> str:
    dirty = " (with uncommitted changes)" if meta.git_dirty else ""
    return f"{meta.date[:10]}, commit {meta.git_commit}{dirty}, {meta.physical_cores} cores"


@dataclass
class Kept:
    """An ENV:SEED's file of kept runs: those still good for the chosen systems (their
    flags as the row now has them), and whether this invocation may write the file."""

    runs: list[Run]
    writable: bool


def kept_runs(row: Comparison, c: Any, path: Path) -> Kept:
    """The runs kept in `path` with these settings, each of a system whose flags are
    those it ran with (a file from before runs recorded them: the row's; --fresh: none);
    never written over runs kept with other settings."""
    kept = None
    with contextlib.suppress(OSError, ValueError):
        kept = json.loads(path.read_text())
    if not isinstance(kept, dict) or "runs" not in kept:
        if path.exists():
            h.progress(f"{path} cannot be read; its runs are run again")
        return Kept([], True)
    theirs = {k: v for k, v in kept.get("settings", {}).items() if k != "systems"}
    if theirs != (mine := settings(row, c)):
        other = {k: v for k, v in theirs.items() if mine.get(k) != v}
        h.progress(f"{path} was run with other settings ({other}); its runs are run again, "
                   "and that file is left as it is")  # fmt: skip
        return Kept([], False)
    runs = []
    for data in kept["runs"]:
        s = next((x for x in row.systems if x.name == data["system"]), None)
        if s is None:
            continue
        run = Run(**{"sitting": kept.get("sitting", ""), "flags": as_json(s.flags), **data})
        runs.append(run)
    return Kept(runs, True)


After = Callable[[System, Run, Path], None]


def measure(row: Comparison, c: Any, meta: h.Metadata, after: After | None = None) -> Outcome:
    """Every chosen system on every ENV:SEED of `c.runs`, interleaved, but for a kept
    run of it; `after(system, run, its run directory)` once each run has ended (untimed).
    An ENV:SEED's file keeps its runs, each replaced by a newer one of its system."""
    outcome = Outcome(row.name, [])
    chosen = [row.system(name) for name in c.systems]
    warmed = c.quick  # timed claims only: the first run should not pay for a cold cache
    with tempfile.TemporaryDirectory(prefix=f"pararl-bench-{row.name}-") as tmp:
        for spec in c.runs:
            env, _, seed_text = spec.rpartition(":")
            seed, path, kept = int(seed_text), None, Kept([], False)
            if c.keep_dir is not None:
                path = c.keep_dir / f"{file_name(env)}-seed{seed}.json"
                kept = kept_runs(row, c, path)
            mine = {r.system: r for r in kept.runs}
            todo = [s for s in chosen if not s.anchor or (
                (not row.anchor_envs or env in row.anchor_envs)
                and (not row.anchor_seeds or seed in row.anchor_seeds))]  # fmt: skip
            usable = {n: r for n, r in mine.items()
                      if not c.fresh and r.flags == as_json(row.system(n).flags)}  # fmt: skip
            for s in todo:
                if s.name in usable:
                    h.progress(f"{row.name}: {s.name} {spec}: kept ({usable[s.name].sitting})")
            ran: list[Run] = []
            for s in (s for s in todo if s.name not in usable):
                if not warmed:
                    training.warm_up(Path(tmp))
                    warmed = True
                h.progress(f"{row.name}: {s.name} {env} seed {seed} ...")
                run = run_one(row, c, s, env, seed, Path(tmp))
                run.sitting = sitting(meta)
                if after is not None and run.ok:
                    after(s, run, directory(Path(tmp), s.name, env, seed))
                final = run.final(c.final_evals)
                shown = run.status if final is None else f"{run.status}, final {final:.1f}"
                h.progress(f"{row.name}: {s.name} {env} seed {seed}: {shown}, {run.wall_s:.0f} s")
                ran.append(run)
            fresh = {r.system: r for r in ran}
            outcome.runs += [usable.get(s.name) or fresh[s.name] for s in todo]
            if kept.writable and path is not None and ran and all(r.ok for r in ran):
                mine |= fresh
                data = {"settings": settings(row, c),
                        "runs": [dataclasses.asdict(r) for r in mine.values()]}  # fmt: skip
                h.write_atomic(path, json.dumps(data, indent=1) + "\n")
    return outcome


# --- what they show ---------------------------------------------------------------------


@dataclass
class Line:
    """One system on one env over its seeds, against its anchor."""

    env: str
    system: str
    runs: int
    final: h.Summary | None
    wall: h.Summary | None  # launch to exit, of the runs that ended well
    solved: int = 0  # with a target
    solve_s: float | None = None  # with a target: median wall, a run not solved as never
    anchor_final: float | None = None  # its anchor's median final on this env
    reach_s: float | None = None  # median over seeds of the time to reach its seed's one
    reached: int = 0
    paired: int = 0  # seeds with an anchor run to compare with
    vs_anchor: float | None = None  # that time ÷ that anchor run's wall (median over seeds)
    wall_vs_anchor: float | None = None  # its wall ÷ its seed's anchor run's (median over seeds)


def seed_anchor(runs: Sequence[Run], run: Run, anchor: str) -> Run | None:
    """`anchor`'s run of `run`'s env and seed, if it ended well."""
    return next((r for r in runs if (r.system, r.env, r.seed) == (anchor, run.env, run.seed)
                 and r.ok), None)  # fmt: skip


def wall_ratio(runs: Sequence[Run], mine: Sequence[Run], other: str) -> float | None:
    """The median over seeds of each of `mine`'s walls over `other`'s run of its env and
    seed: a seed's runs share a sitting, kept seeds may come from others."""
    walls = [r.wall_s / o.wall_s for r in mine
             if r.ok and (o := seed_anchor(runs, r, other)) is not None]  # fmt: skip
    return statistics.median(walls) if walls else None


def paired(runs: Sequence[Run], run: Run, anchor: str, last: int) -> tuple[float, float] | None:
    """When `run` first reached the final of `anchor`'s run of its env and seed, and that
    over the anchor run's wall time (inf: never); None without such a run."""
    other = seed_anchor(runs, run, anchor)
    if other is None or (target := other.final(last)) is None:
        return None
    reach = time_to_reach(run, target)
    return reach, reach / other.wall_s


def lines(row: Comparison, runs: Sequence[Run], last: int) -> list[Line]:
    out: list[Line] = []
    for env in dict.fromkeys(r.env for r in runs):
        for name in dict.fromkeys(r.system for r in runs if r.env == env):
            mine = [r for r in runs if r.env == env and r.system == name]
            finals = [f for r in mine if (f := r.final(last)) is not None]
            line = Line(
                env, name, len(mine), h.maybe(finals), h.maybe([r.wall_s for r in mine if r.ok])
            )
            if row.target is not None:
                line.solved = sum(solved(row, r) for r in mine)
                walls = [r.wall_s if solved(row, r) else math.inf for r in mine]
                line.solve_s = censored_median(walls)
            out.append(line)
    for line in out:
        anchor = row.anchor_of(row.system(line.system))
        theirs = next(
            (x for x in out if anchor and (x.env, x.system) == (line.env, anchor.name)), None
        )
        if anchor is None or theirs is None:
            continue
        if row.target is not None:
            line.vs_anchor = h.ratio(line.solve_s, theirs.solve_s)
            continue
        line.anchor_final = h.med(theirs.final)
        mine = [r for r in runs if (r.env, r.system) == (line.env, line.system)]
        pairs = [p for r in mine if (p := paired(runs, r, anchor.name, last)) is not None]
        line.paired, line.reached = len(pairs), sum(t != math.inf for t, _ in pairs)
        line.reach_s = censored_median([t for t, _ in pairs])
        line.vs_anchor = censored_median([share for _, share in pairs])
        line.wall_vs_anchor = wall_ratio(runs, mine, anchor.name)
    return out


def family(env: str) -> str:
    """The name's last part before its version: `MinAtar/Breakout-v1` -> `Breakout`,
    `popgym:popgym-RepeatPreviousEasy-v0` -> `RepeatPreviousEasy`."""
    parts = env.split(":")[-1].split("/")[-1].split("-")
    named = [p for p in parts if not re.fullmatch(r"v\d+", p)] or parts
    return named[-1]


def whole(v: float | None) -> str:
    """A return: whole from 100; below, three significant digits with a decimal at least
    (0.972, 43.7, 4.0; one decimal alone showed 0.972 as 1.0)."""
    if v is None:
        return "–"
    v = 0.0 if abs(v) < 1e-9 else v  # a mean of returns that cancel, in float (4.6e-18)
    text = f"{v:.3g}"
    if abs(float(text)) >= 100:  # 99.96 too
        return f"{v:.0f}"
    return text if "." in text or "e" in text else f"{text}.0"


def extra_summary(runs: Sequence[Run], env: str, system: str, key: str) -> h.Summary | None:
    """`key` of `after`'s extras over the runs of `system` on `env`."""
    return h.maybe([r.extra[key] for r in runs if (r.env, r.system) == (env, system)
                    and r.extra.get(key) is not None])  # fmt: skip


def key_ratios(row: Comparison, table: Sequence[Line], runs: Sequence[Run]) -> str:
    """The claim of each pararl system against its anchor, env by env."""
    label = {s.name: s.label for s in row.systems}
    parts = []
    for line in table:
        anchor = row.anchor_of(row.system(line.system))
        if anchor is None:
            continue
        name = f"{family(line.env)} {label[line.system]}"
        if row.target is not None:
            ratio = h.fmt_ratio(line.vs_anchor)
            if line.vs_anchor is None:
                ratio = "not solved" if line.solve_s is None else f"– ({anchor.label} not solved)"
            parts.append(
                f"{name}: time to solve ÷ {anchor.label} {ratio} ({line.solved}/{line.runs} solved)"
            )
            continue
        text = f"{name}: final {whole(h.med(line.final))}"
        if line.anchor_final is not None:
            text += f" vs {anchor.label} {whole(line.anchor_final)}"
            text += f", wall ÷ {anchor.label} {h.fmt_ratio(line.wall_vs_anchor)}"
            reach = f"reached in {h.fmt_ratio(line.vs_anchor)} its wall time"
            text += f", {anchor.label}'s final {'not reached' if line.vs_anchor is None else reach}"
        for key in row.extras:
            ours, its = (h.med(extra_summary(runs, line.env, w, key))
                         for w in (line.system, anchor.name))  # fmt: skip
            text += f", {key} {whole(ours)} vs {whole(its)}"
        parts.append(text + f", {line.runs} seed(s)")
    return "; ".join(parts) or "nothing measured"


def tables(row: Comparison, outcome: Outcome, c: Any, table: Sequence[Line]) -> list[str]:
    """The summary over seeds (`table`), every run, and the published figures."""
    label = {s.name: s.label for s in row.systems}
    n = c.final_evals

    def reach(x: Line) -> str:
        if x.anchor_final is None:
            return ""
        return h.fmt_num(x.reach_s, 0) if x.reach_s is not None else "not reached"

    cols: list[h.Col[Line]] = [
        h.Col("env", lambda x: x.env, "l"),
        h.Col("system", lambda x: label[x.system], "l"),
        h.Col("runs", lambda x: x.runs),
        h.Col(f"final (last {n} evals), median (min–max)", lambda x: h.fmt_spread(x.final, whole)),
        h.Col("wall s, launch to exit", lambda x: h.fmt_spread(x.wall, whole)),
    ]
    if row.target is not None:
        cols += [
            h.Col("solved", lambda x: f"{x.solved}/{x.runs}", "c"),
            h.Col("time to solve, median (s)", lambda x: h.fmt_num(x.solve_s) if x.solve_s
                  else "not solved"),
            h.Col(f"÷ anchor (target ≤ {row.reach:g})", lambda x: h.fmt_ratio(x.vs_anchor)),
        ]  # fmt: skip
    else:
        cols += [
            h.Col("anchor's final", lambda x: h.fmt_num(x.anchor_final)),
            h.Col("time to reach its seed's (s), median", reach),
            h.Col("seeds reaching it", lambda x: "" if x.anchor_final is None
                  else f"{x.reached}/{x.paired}"),
            h.Col(f"÷ that run's wall, median (target ≤ {row.reach:g})",
                  lambda x: h.fmt_ratio(x.vs_anchor)),
        ]  # fmt: skip

    def per_s(count: int, r: Run) -> str:
        return h.fmt_rate(count / r.wall_s if r.wall_s and r.ok else None)

    run_cols: list[h.Col[Run]] = [
        h.Col("env", lambda r: r.env, "l"),
        h.Col("system", lambda r: label.get(r.system, r.system), "l"),
        h.Col("seed", lambda r: r.seed),
        h.Col("trainer says", lambda r: r.status or "–", "l"),
        h.Col("final", lambda r: h.fmt_num(r.final(n))),
        h.Col("best eval", lambda r: h.fmt_num(r.best())),
        h.Col("training return", lambda r: h.fmt_num(r.train_return)),
        h.Col("wall (s)", lambda r: h.fmt_num(r.wall_s, 0)),
        h.Col("env steps/s", lambda r: per_s(r.env_steps, r)),
        h.Col("updates", lambda r: f"{r.updates:,}"),
        h.Col("note", lambda r: r.note[-80:], "l"),
    ]
    if row.target is not None:
        run_cols.insert(5, h.Col("check mean", lambda r: h.fmt_num(r.check)))

    def extra(key: str) -> Callable[[Run], str]:
        return lambda r: h.fmt_num(r.extra.get(key), 2)

    def spread(key: str) -> Callable[[Line], str]:
        return lambda x: h.fmt_spread(extra_summary(outcome.runs, x.env, x.system, key),
                                      lambda v: f"{v:.2f}")  # fmt: skip

    run_cols[-1:-1] = [h.Col(words, extra(key)) for key, words in row.extras.items()]
    if c.keep_dir is not None:
        run_cols.append(h.Col("ran", lambda r: r.sitting, "l"))
    target = "" if row.target is None else (
        f" Each run stops at its first evaluation of {row.target:g} or more; solved: stopped "
        f"there and a {c.verify_episodes}-episode check of its saved policy agrees; an "
        "unsolved run counts as never solved in the median."
    )  # fmt: skip
    own = {env: row.budget_of(c, env) for env in dict.fromkeys(r.env for r in outcome.runs)}
    own = {env: n for env, n in own.items() if n != c.budget}
    budget = f"{c.budget:,}" + "".join(f", {family(e)} {n:,}" for e, n in own.items())
    evals = (
        f"deterministic evaluation every {c.eval_every:,} steps ({c.eval_episodes} "
        f"episodes); final return: the mean of the last {n} evaluations. "
    )
    protocol = (
        f"Budget {budget} env steps per run; {evals if c.eval_every < NEVER else ''}"
        f"{row.notes} Wall times are launch to exit (start-up "
        "included); each curve is on that clock. Time to reach the anchor's final, per "
        "seed: the first evaluation at or above the final of the anchor's run of the same "
        f"env and seed, over that run's wall time; medians over seeds.{target}"
    )
    blocks = [f"### {row.title}\n\n{protocol}\n\n{h.table(cols, table)}"]
    if row.extras:  # `after`'s, over seeds
        extra_cols = cols[:3] + [h.Col(f"{words}, median (min–max)", spread(key))
                                 for key, words in row.extras.items()]  # fmt: skip
        blocks.append(h.table(extra_cols, table))
    blocks.append(f"Runs, in the order run:\n\n{h.table(run_cols, outcome.runs)}")
    rows = [[f, *row.figures[f]] for f in dict.fromkeys(family(r.env) for r in outcome.runs)
            if f in row.figures]  # fmt: skip
    if rows:
        blocks.append(f"{row.published_note}\n\n{h.text_table(row.published, rows)}")
    return blocks


def panels(row: Comparison, runs: Sequence[Run]) -> list[Panel]:
    """Return against env steps and against wall time per env, a line a run."""
    out = []
    colors = {s.name: s.color or f"C{i}" for i, s in enumerate(row.systems)}
    label = {s.name: s.label for s in row.systems}
    for env in dict.fromkeys(r.env for r in runs):
        mine = [r for r in runs if r.env == env and r.curve]
        first = {r.system: r for r in reversed(mine)}
        line = row.lines.get(family(env))
        hlines: list[tuple[float, str, str | None]] = [(line[0], ":", line[1])] if line else []
        for axis, name in (("env_steps", "env steps"), ("wall_s", "wall time, launch to exit (s)")):
            series = [
                Series(label[r.system] if first[r.system] is r else None,
                       [p[axis] for p in r.curve], [p["eval_return"] for p in r.curve],
                       fmt="--" if row.system(r.system).anchor else "-", color=colors[r.system])
                for r in mine
            ]  # fmt: skip
            title = f"{env}: return vs {name.split(',')[0]}"
            out.append(Panel(title, series, name, "eval return", hlines=hlines))
        for key, words in row.extras.items():  # `after`'s, a point a seed
            names = list(dict.fromkeys(r.system for r in runs if r.env == env))
            series = [Series(label[n], [i] * len(ys), ys, kind="points", fmt="o", color=colors[n])
                      for i, n in enumerate(names)
                      if (ys := [r.extra[key] for r in runs if (r.env, r.system) == (env, n)
                                 and r.extra.get(key) is not None])]  # fmt: skip
            out.append(Panel(f"{env}: {words}", series, ylabel=words, legend=key == "train"))
    return out


def report(row: Comparison, outcome: Outcome, c: Any) -> tuple[str, list[str], list[Panel]]:
    """Key ratios, blocks and panels of one comparison."""
    table = lines(row, outcome.runs, c.final_evals)
    blocks = tables(row, outcome, c, table)
    return key_ratios(row, table, outcome.runs), blocks, panels(row, outcome.runs)


def describe(row: Comparison) -> str:
    """The table's defaults in words, for `--help`."""
    systems = ", ".join(s.name + ("" if s.default else " (not by default)") for s in row.systems)
    budgets = "".join(f", {env} {n:,}" for env, n in row.budgets.items())
    target = "" if row.target is None else f"; target {row.target:g}"
    return (
        f"Its table: runs {' '.join(row.runs)}; systems {systems}; budget {row.budget:,}"
        f"{budgets}; eval every {row.eval_every:,}, {row.eval_episodes} episodes; final evals "
        f"{row.final_evals}; timeout {row.run_timeout_s:g} s{target}."
    )


def solve_cartpole(algo: str, systems: tuple[System, ...], budget: int, quick: int) -> Comparison:
    """Time to solve CartPole-v1 (475), pararl's `systems` against SB3's `algo` with the
    zoo's settings; `quick`: --quick's budget."""
    anchor = System("sb3", f"SB3 {algo.upper()} (zoo)", algo, anchor="zoo")
    return Comparison(
        name=algo, title="Time to solve CartPole-v1", systems=(*systems, anchor),
        runs=tuple(f"CartPole-v1:{seed}" for seed in range(3)), budget=budget,
        eval_every=5_000, target=475.0, run_timeout_s=1800.0,
        quick=dict(runs=("CartPole-v1:0",), budget=quick, eval_every=quick // 2,
                   eval_episodes=5, verify_episodes=5, run_timeout_s=120.0),
        notes=f"SB3: rl-baselines3-zoo's CartPole-v1 {algo.upper()} settings.",
    )  # fmt: skip


def with_options(row: Comparison, c: Any) -> Comparison:
    """`row` with the benchmark's own `learning_starts` and `hidden` (the anchor's `net`)
    over every system's flags."""
    ours = {k: getattr(c, k) for k in ("learning_starts", "hidden") if hasattr(c, k)}
    theirs = {k: v for k, v in ours.items() if k != "hidden"}
    if "hidden" in ours:
        theirs["net"] = list(ours["hidden"])
    return dataclasses.replace(row, systems=tuple(
        dataclasses.replace(s, flags={**s.flags, **(theirs if s.anchor else ours)})
        for s in row.systems
    ))  # fmt: skip


def one(row: Comparison, heading: str, quick: Mapping[str, Any], checks: Sequence[str],
        after: Callable[[Any], After] | None = None) -> Any:  # fmt: skip
    """The benchmark that is `row` alone (`resolve`, `measure`, `report`, `ROW`), titled
    `heading`; its own options' --quick values and `h.require` rules, and `after(c)`, the
    hook each run's end calls (`measure`'s)."""

    def resolve_one(config: Any) -> Any:
        c = h.apply_quick(resolve(row, config), quick)
        h.require(c, *checks)
        return c

    def measure_one(c: Any, meta: h.Metadata) -> Outcome:
        return measure(with_options(row, c), c, meta, None if after is None else after(c))

    def report_one(outcome: Outcome, meta: h.Metadata) -> h.Report:
        c = SimpleNamespace(**meta.params)
        ratios, blocks, figs = report(with_options(row, c), outcome, c)
        return h.Report(heading, ratios, blocks, figs, f"{row.name} benchmark", legend_below=True)

    return SimpleNamespace(ROW=row, resolve=resolve_one, measure=measure_one, report=report_one)
