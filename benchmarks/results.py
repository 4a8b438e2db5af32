"""`python -m benchmarks results`: whole runs with pararl's defaults at the field's
budgets beside published numbers (RESULTS.md), carried on across invocations with
`--resume`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import pixels
from benchmarks.lib import harness as h
from benchmarks.lib import sb3, training
from benchmarks.lib.compare import System
from benchmarks.lib.figures import Panel, Series, save_figure
from pararl.config.run import RunConfig
from pararl.errors import sigterm_as_interrupt

DONE = ("solved", "step budget reached")  # a pararl run's final status when it ended by itself
RESUMED = re.compile(r"pararl: resuming from \S+: (?P<steps>[\d,]+) env steps")
FINISHED = re.compile(r" is finished \((?P<status>[^,]+),")
HOME = "2 cores"  # this project's machine, where the runs are measured
MIN_PIECE_S = 300.0  # a piece shorter than this would end before its first checkpoint


@dataclass(frozen=True)
class Published:
    """A number from a project's own pages or paper (not re-measured here)."""

    source: str
    value: float | None  # drawn as a line; None: words only
    text: str
    short: str = ""  # the line's legend


@dataclass(frozen=True)
class Entry:
    """One whole run of a `System` (pararl, or the SB3 anchor of its `group`) on `env`, seed
    0, for the field's budget (MAML: meta-iterations); `quick`: --quick's tiny run."""

    name: str
    group: str  # entries of a group share a figure and sit together in the table
    system: System
    env: str
    budget: int
    published: tuple[Published, ...] = ()
    quick: Mapping[str, object] = field(default_factory=dict)

    @property
    def maml(self) -> bool:
        return self.system.algo == "maml"


def paper(kind: str, figure: str) -> Published:
    """The MinAtar paper's `kind` ("DQN", "actor-critic") figure, "~N" read off its plots."""
    source = ("MinAtar paper (Young & Tian 2019), 5M frames, sticky actions 0.1, read off its "
              f"plots, {kind}")  # fmt: skip
    short = "AC" if kind == "actor-critic" else kind
    return Published(source, float(figure[1:]), figure, f"MinAtar paper {short}, 5M")


def gymnax(figure: str) -> Published:
    return Published("gymnax PPO, 10M steps, no sticky actions", float(figure), figure,
                     "gymnax PPO, 10M")  # fmt: skip


CLEANRL_PONG = Published("CleanRL ppo_atari, 10M agent steps = 40M frames (281 min, 1 GPU + "
                         "10 CPUs)", 20.36, "20.36 in 281 min", "CleanRL, 10M steps")  # fmt: skip
PPO, MAML = System("pararl-ppo", "pararl PPO", "ppo"), System("pararl", "pararl MAML", "maml")
PONG = System("pararl-ppo", "pararl PPO", "ppo", {"target_return": 18.0})  # stops at 18
DQN, SB3_DQN = (pixels.ROW.system(name) for name in ("pararl-dqn", "sb3-dqn"))
# --quick: tiny runs, evaluated in the training process (every evaluation taken)
QUICK_PPO = {"total_steps": 4_096, "eval_every": 1_024, "eval_episodes": 2, "eval_in": "inline"}
QUICK_DQN = {"total_steps": 3_000, "learning_starts": 1_000, "eval_every": 500,
             "eval_episodes": 2, "eval_in": "inline"}  # fmt: skip
QUICK_PONG = {"total_steps": 4_096, "eval_every": 1_024, "eval_episodes": 1,
              "eval_max_steps": 500, "eval_in": "inline"}  # fmt: skip
QUICK_MAML = {"meta_iterations": 4, "meta_batch_size": 2, "fast_batch_size": 2,
              "episode_length": 20}  # fmt: skip
BREAKOUT, INVADERS = "MinAtar/Breakout-v1", "MinAtar/SpaceInvaders-v1"
ENTRIES: tuple[Entry, ...] = (
    Entry("minatar-ppo-breakout", "minatar-ppo-breakout", PPO, BREAKOUT, 5_000_000,
          (paper("actor-critic", "~17.5"), gymnax("28")), QUICK_PPO),
    Entry("minatar-ppo-spaceinvaders", "minatar-ppo-spaceinvaders", PPO, INVADERS, 5_000_000,
          (paper("actor-critic", "~185"), gymnax("131")), QUICK_PPO),
    Entry("minatar-ppo-freeway", "minatar-ppo-freeway", PPO, "MinAtar/Freeway-v1", 5_000_000,
          (paper("DQN", "~50"),), QUICK_PPO),
    Entry("pong-ppo", "pong-ppo", PONG, "ALE/Pong-v5", 2_500_000, (CLEANRL_PONG,), QUICK_PONG),
    # CleanRL's budget
    Entry("pong-ppo-10m", "pong-ppo-10m", PONG, "ALE/Pong-v5", 10_000_000, (CLEANRL_PONG,),
          QUICK_PONG),
    *(Entry(f"minatar-dqn-{game}{tail}", f"minatar-dqn-{game}", system, env, 1_000_000,
            (paper("DQN", figure),), QUICK_DQN)
      for game, env, figure in (("breakout", BREAKOUT, "~10"), ("spaceinvaders", INVADERS, "~43"))
      for tail, system in (("", DQN), ("-sb3", SB3_DQN))),
    Entry("maml-halfcheetahdir", "maml-halfcheetahdir", MAML, "pararl/HalfCheetahDir-v0", 200,
          (Published("MAML paper, Fig. 5; pytorch-maml-rl's curve", None, "after-adaptation "
                     "return pulls away from before over meta-training"),), QUICK_MAML),
    Entry("maml-navigation2d", "maml-navigation2d", MAML, "pararl/Navigation2D-v0", 500,
          (Published("MAML paper, Fig. 4", None, "after one adaptation step the policy heads "
                     "for the goal"),), QUICK_MAML),
)  # fmt: skip
NAMES = tuple(e.name for e in ENTRIES)


@dataclass(frozen=True)
class Config(h.Options):
    """Whole runs with the defaults at the field's budgets (hours each on 2 cores),
    carried on across invocations. --quick: tiny runs in --out-dir, nothing saved in the
    repository."""

    entries: tuple[str, ...] = NAMES  # Which runs, in order (each to its end before the next).
    hours: float = 0.0  # Stop (the run saved) after this many hours (0: never); rerun carries on.
    final_evals: int = 10  # A run's final return: the mean of its last this-many evaluations.
    state_dir: Path | None = None  # Run directories and logs (default: under --out-dir).
    saved_dir: Path | None = None  # The runs' saved curves (default: <repo>/results).


def resolve(c: Config) -> Config:
    unknown = [n for n in c.entries if n not in NAMES]
    pick = f"--entries: unknown {', '.join(unknown)}; pick from {', '.join(NAMES)}"
    h.check([(bool(unknown), pick),
             (c.hours < 0, "--hours must be >= 0"), (not c.entries, "--entries needs a name"),
             (c.final_evals < 1, "--final-evals must be >= 1")])  # fmt: skip
    base = c.out_dir or h.ROOT / "bench_results"
    state = c.state_dir or (base / ("results_quick" if c.quick else "results"))
    saved = c.saved_dir or (base / "results_quick" if c.quick else h.ROOT / "results")
    # absolute: the runs start in state_dir and are handed their run directories; the
    # page is RESULTS.md, not BENCHMARKS.md
    md = c.benchmarks_md or h.ROOT / "RESULTS.md"
    return dataclasses.replace(c, state_dir=state.resolve(), saved_dir=saved.resolve(),
                               benchmarks_md=md)  # fmt: skip


# --- what a run leaves ------------------------------------------------------------------

Point = list[float]  # x (env steps; MAML: meta-iteration), wall s, return


@dataclass
class Piece:
    """One invocation's share of a run: its code, start, from where to where (env steps;
    MAML: meta-iterations), how it ended, its machine (`machine()`; empty in older
    records: this project's) and its share of the run's own clock."""

    commit: str | None
    dirty: bool | None
    date: str
    from_x: float
    to_x: float
    status: str
    machine: str = ""
    wall_s: float | None = None


def machine() -> str:
    """Where a piece runs: its cores, and its GPU if torch sees one (a learner on it)."""
    import torch

    from pararl.mp.topology import physical_cores

    cores = f"{physical_cores()} cores"
    return f"{cores} + {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else cores


@dataclass
class Saved:
    """What the page shows of a run, kept in the repository (`results/NAME.json`)."""

    name: str
    command: str
    status: str  # "running" until it ends by itself; then its final status
    x_label: str
    curves: dict[str, list[Point]]  # the first is the one evaluated
    wall_s: float = 0.0  # the run's own clock (resumes carry it on; pauses are not in it)
    pieces: list[Piece] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status in DONE

    @property
    def main(self) -> list[Point]:
        return next(iter(self.curves.values()), [])

    @property
    def reached(self) -> float:
        return max((p[0] for c in self.curves.values() for p in c), default=0.0)

    @classmethod
    def load(cls, directory: Path, name: str) -> Saved | None:
        with contextlib.suppress(FileNotFoundError):
            data = json.loads((directory / f"{name}.json").read_text())
            data["pieces"] = [Piece(**p) for p in data.get("pieces", [])]
            return cls(**data)
        return None

    def save(self, directory: Path) -> None:
        text = json.dumps(dataclasses.asdict(self), indent=1) + "\n"
        h.write_atomic(directory / f"{self.name}.json", text)


def thin(points: list[Point], most: int = 600) -> list[Point]:
    """At most `most` points, evenly over the list, the last one kept."""
    if len(points) <= most:
        return points
    return [*(points[int(i * len(points) / most)] for i in range(most - 1)), points[-1]]


def _points(rows: list[dict[str, str]], x: str, y: str) -> list[Point]:
    out = []
    for r in rows:
        with contextlib.suppress(KeyError, ValueError, TypeError):
            out.append([float(r[x]), round(float(r["wall_s"]), 2), round(float(r[y]), 3)])
    return out


def read_curves(e: Entry, run_dir: Path) -> tuple[dict[str, list[Point]], float]:
    """A pararl run's curves (the evaluated one first), and its own clock."""
    rows = training.read_metrics(run_dir)
    wall = max((float(r["wall_s"]) for r in rows if r.get("wall_s")), default=0.0)
    if e.maml:  # the returns before and after adaptation, per iteration
        rows = [r for r in rows if r.get("pre_return")]
        return {"after one adaptation step": _points(rows, "iteration", "post_return"),
                "before adaptation": _points(rows, "iteration", "pre_return")}, wall  # fmt: skip
    train = _points([r for r in rows if r.get("episode_return")], "env_steps", "episode_return")
    evals = training.read_metrics(run_dir, "eval.csv")
    return {"greedy evaluation": _points(evals, "env_steps", "eval_return"),
            "training episodes (last 20)": thin(train)}, wall  # fmt: skip


# --- running and carrying on -------------------------------------------------------------


def pararl_command(e: Entry, run_dir: Path, quick: bool) -> list[str]:
    flags: dict[str, object] = {"env": e.env, "seed": 0, **e.system.flags}
    flags["meta_iterations" if e.maml else "total_steps"] = e.budget
    if quick:
        flags |= e.quick
    return training.train_command(e.system.algo, run_dir=run_dir, progress="plain", **flags)


def anchor_command(e: Entry, c: Config) -> list[str]:
    """The SB3 anchor of `e.group` with pararl's MinAtar settings (`lib.sb3`) and its
    evaluation schedule."""
    flags: dict[str, object] = {"seed": 0, "eval_every": RunConfig.BY_KIND["minatar"]["eval_every"],
                                "eval_episodes": RunConfig.eval_episodes}  # fmt: skip
    budget = e.budget
    if c.quick:
        flags |= {k: v for k, v in e.quick.items() if k in ("eval_every", "eval_episodes")}
        budget = int(str(e.quick["total_steps"]))
    return sb3.command(e.system.algo, "learn", anchor=e.system.anchor, env=e.env, budget=budget,
                       **flags)  # fmt: skip


def shown(cmd: Sequence[str]) -> str:
    """The command as a user types it: `pararl train ...` without the run directory, or
    `python -m ...`."""
    if cmd[:3] != training.PARARL:
        return "python -m " + " ".join(cmd[2:])
    args, out = list(cmd[3:]), []
    while args:
        a = args.pop(0)
        if a in ("--run-dir", "--progress"):
            args.pop(0)
        else:
            out.append(a)
    return "pararl " + " ".join(out)


class StoppedError(Exception):
    """The invocation's time is up."""


def advance(e: Entry, c: Config, deadline: float | None,
            until: Callable[[], bool] | None = None) -> Saved:  # fmt: skip
    """Carry the run of `e` on (start or resume it) until it ends, the deadline passes
    (StoppedError) or `until()` holds; Ctrl-C or SIGTERM: KeyboardInterrupt, once the
    run has saved (pararl: its checkpoint; SB3: its state directory) and its piece is
    recorded."""
    assert c.state_dir is not None
    assert c.saved_dir is not None
    saved = Saved.load(c.saved_dir, e.name)
    if saved is not None and saved.done:
        h.progress(f"results: {e.name}: finished earlier ({saved.status})")
        return saved
    if deadline is not None and deadline - time.monotonic() < MIN_PIECE_S:
        raise StoppedError
    run_dir = c.state_dir / e.name
    if e.system.anchor:
        fresh = anchor_command(e, c)
        resuming = (run_dir / sb3.CURVE).exists()
        cmd = [*fresh, "--state", str(run_dir)]
    else:
        fresh = pararl_command(e, run_dir, c.quick)
        # a checkpoint `--resume` takes (not `best`, which is for acting, nor the memory)
        names = (p.stem for p in (run_dir / "checkpoints").glob("*.pt"))
        resuming = any(n not in ("best", "replay") for n in names)
        cmd = [*training.PARARL, "train", "--resume", str(run_dir), "--progress", "plain"]
        if not resuming:
            cmd = fresh
            if run_dir.exists():  # started, stopped before its first checkpoint: kept aside
                run_dir.rename(run_dir.with_name(f"{e.name}.stale-{int(time.time())}"))
    saved = saved if resuming else None
    meta = h.Metadata("", {})  # the code this piece runs
    h.progress(f"results: {e.name}: {'resuming' if resuming else 'starting'}: {shown(fresh)}")
    how, code, text = training.run_until(
        cmd, c.state_dir / f"{e.name}.log", c.state_dir, deadline, until
    )
    now = saved or Saved(e.name, shown(fresh), "", "meta-iteration" if e.maml else "env steps", {})
    from_x = to_x = now.reached
    before_s, share = now.wall_s, 0.0
    if e.system.anchor:
        result = sb3.parse(text, e.system.algo)
        now.status = f"failed (exit {code})"
        if result is not None:
            now.status = "paused" if result["paused"] else "step budget reached"
            points = [[p["env_steps"], p["wall_s"], p["eval_return"]] for p in result["curve"]]
            now.curves = {"evaluation (deterministic)": points}
            from_x, to_x = float(result["from_steps"]), float(result["env_steps"])
            now.wall_s, share = result["train_s"], result["train_s"] - before_s
    else:
        now.status = piece_status(how, code, text)
        now.curves, now.wall_s = read_curves(e, run_dir)
        share, to_x = now.wall_s - before_s, now.reached
        # from the checkpoint it resumed, to where it stopped (its last line: the steps of
        # its last checkpoint, which the next piece resumes; metrics.csv may end before)
        resumed, final = RESUMED.search(text), training.parse_final(text)
        if not e.maml:  # MAML's x: meta-iterations
            from_x = float(resumed["steps"].replace(",", "")) if resumed else from_x
            to_x = max(to_x, float(final["env_steps"])) if final else to_x
    piece = Piece(meta.git_commit, meta.git_dirty, meta.date, from_x, to_x, now.status, machine(),
                  share)  # fmt: skip
    now.pieces.append(piece)
    now.save(c.saved_dir)
    h.progress(f"results: {e.name}: {now.status} at {to_x:,.0f} ({_hours(now.wall_s)})")
    if how == "interrupted":
        raise KeyboardInterrupt
    if how == "deadline":
        raise StoppedError
    return now


def piece_status(how: training.Ending, code: int | None, text: str) -> str:
    """A run's status after a piece: its final status when it ended by itself."""
    if how != "ended":
        return "paused"
    final = training.parse_final(text)
    if code == 0 and final is not None and final["status"] in DONE:
        return str(final["status"])
    if code == 0 and (finished := FINISHED.search(text)) and finished["status"] in DONE:
        return finished["status"]  # resumed after it had ended
    return f"failed (exit {code})"


# --- measure and report --------------------------------------------------------------------


@dataclass
class Results:
    saved: list[Saved]  # every entry's, in ENTRIES' order (those run so far)
    stopped: str = ""  # why this invocation stopped before its last entry


def measure(c: Config, meta: h.Metadata) -> Results:
    assert c.saved_dir is not None
    results = Results([])
    deadline = None if not c.hours else time.monotonic() + c.hours * 3600.0
    with sigterm_as_interrupt():  # SIGTERM stops a run as Ctrl-C does
        for name in c.entries:  # each entry's run carried on, in order
            try:
                advance(_entry(name), c, deadline)
            except StoppedError:
                results.stopped = f"--hours {c.hours:g} ran out during {name}"
                break
            except KeyboardInterrupt:
                results.stopped = f"interrupted during {name}"
                break
    results.saved = [s for e in ENTRIES if (s := Saved.load(c.saved_dir, e.name)) is not None]
    return results


def exit_code(results: Results) -> int:
    """130 when interrupted."""
    return 130 if results.stopped.startswith("interrupted") else 0


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _entry(name: str) -> Entry:
    return next(e for e in ENTRIES if e.name == name)


def result_cell(s: Saved, last: int) -> str:
    e = _entry(s.name)
    if e.maml:
        post, pre = (curve[-last:] for curve in s.curves.values())
        if not pre or not post:
            return "–"
        gap = statistics.fmean(p[2] for p in post) - statistics.fmean(p[2] for p in pre)
        return f"after − before: {gap:+.1f} (last {len(pre)})"
    target = e.system.flags.get("target_return")
    hit = next((p for p in s.main if p[2] >= target), None) if isinstance(target, float) else None
    if hit is not None:
        return f"{hit[2]:.1f} at {hit[0]:,.0f} steps, {_hours(hit[1])}"
    values = [p[2] for p in s.main[-last:]]
    return f"{statistics.fmean(values):.1f} (last {len(values)} evals)" if values else "–"


def wall_cell(s: Saved) -> str:
    """The run's own clock; where pieces ran on other machines than this project's, each
    machine's share of it (the rest, pieces recorded before they kept a share included,
    ran here)."""
    away: dict[str, float] = {}
    for p in s.pieces:
        if p.machine not in ("", HOME) and p.wall_s is not None:
            away[p.machine] = away.get(p.machine, 0.0) + p.wall_s
    if not away:
        return _hours(s.wall_s)
    parts = [f"{_hours(w)} on {where}" for where, w in away.items()]
    parts.append(f"{_hours(s.wall_s - sum(away.values()))} on {HOME}")
    return f"{_hours(s.wall_s)}: " + ", ".join(parts)


def _train(s: Saved) -> str:
    train = s.curves.get("training episodes (last 20)") or []
    return f"{train[-1][2]:.1f}" if train else "–"


def _so_far(s: Saved) -> str:
    e = _entry(s.name)
    return f"{s.reached:,.0f} / {e.budget:,} " + ("iterations" if e.maml else "steps")


COLUMNS: list[h.Col[tuple[Saved, int]]] = [
    h.Col("run", lambda r: f"{r[0].name}: {_entry(r[0].name).system.label}", "l"),
    h.Col("env", lambda r: _entry(r[0].name).env, "l"),
    h.Col("run so far / budget", lambda r: _so_far(r[0])),
    h.Col("status", lambda r: r[0].status, "l"),
    h.Col("result", lambda r: result_cell(r[0], r[1]), "l"),
    h.Col("training return", lambda r: _train(r[0])),
    h.Col("wall (its own clock)", lambda r: wall_cell(r[0])),
    h.Col("published", lambda r: "; ".join(f"{p.text} ({p.source})"
                                           for p in _entry(r[0].name).published), "l"),
]  # fmt: skip


def pieces_block(saved: Sequence[Saved]) -> str:
    def piece(p: Piece) -> str:
        where = f"; {p.machine}" if p.machine and p.machine != HOME else ""
        took = "" if p.wall_s is None else f", {_hours(p.wall_s)}"
        return (f"{p.from_x:,.0f}→{p.to_x:,.0f} on {p.commit}{'+' if p.dirty else ''} "
                f"({p.date[:16]}, {p.status}{took}{where})")  # fmt: skip

    lines = [f"- `{s.name}`: `{s.command}`; pieces: {', '.join(map(piece, s.pieces))}"
             for s in saved]  # fmt: skip
    return (
        "Commands, and each piece of each run (from→to, commit, start, how it ended, its "
        f"share of the clock, and its machine where not {HOME}; `+`: with uncommitted "
        "changes):\n\n" + "\n".join(lines)
    )


def group_panels(saved: Sequence[Saved]) -> list[Panel]:
    """Return against the x axis (env steps or meta-iterations) and against wall hours."""
    panels, entry = [], _entry(saved[0].name)
    drawn = [p for p in entry.published if p.value is not None]
    lines: list[tuple[float, str, str | None]] = [
        (p.value or 0.0, (":", "-.", "--")[i % 3], f"{p.text}: {p.short}")
        for i, p in enumerate(drawn)
    ]
    for xi, xlabel in ((0, saved[0].x_label), (1, "wall time, hours (the run's own clock)")):
        series, colour = [], 0
        for s in saved:
            for label, points in s.curves.items():
                name = f"{_entry(s.name).system.label}: {label}" if len(saved) > 1 else label
                xs = [p[xi] / (3600 if xi else 1) for p in points]
                fmt = "-" if "training" not in label and "before" not in label else "--"
                series.append(Series(name, xs, [p[2] for p in points], fmt=fmt, color=f"C{colour}"))
                colour += 1
        panels.append(Panel(entry.env, series, xlabel, "return", hlines=lines))
    return panels


PROTOCOL = """Every run uses pararl's defaults for its env (printed at its start and saved in its
`config.json`), seed 0, on this machine (2 cores; other work may have shared them during
a piece, so read wall times as upper bounds), carried over sessions with `pararl train
--resume`. A piece run on another machine (a GPU's, say) names it, and the wall column
gives each machine's share. Wall time is the run's own clock (from its `metrics.csv`):
the pieces add up, and the pauses between them are not in it. The result is the mean of
the last evaluations (pararl's defaults: the greedy policy, 20 episodes, in a separate
process, with sticky actions as in training on MinAtar), or for a run with a target its
first evaluation at or above it. The training return is the mean of the last 20 training
episodes, with the actions the run trained with (sampled for PPO, epsilon-greedy for
DQN), which is what the MinAtar paper's curves show. MAML: the mean return of the tasks'
episodes after one adaptation step, against before it. The published numbers are the
projects' own, at the budgets they name, not re-measured here. An SB3 anchor runs with
the same settings and evaluations on the same envs (`benchmarks/lib/sb3.py`), in pieces
as pararl's runs (its clock: each piece from the start of its process, model and replay
memory loaded, to its stop)."""


def report(results: Results, meta: h.Metadata) -> h.Report:
    c = Config(**meta.params)
    assert c.benchmarks_md is not None
    blocks = [PROTOCOL, h.table(COLUMNS, [(s, c.final_evals) for s in results.saved]),
              pieces_block(results.saved)]  # fmt: skip
    for group in dict.fromkeys(_entry(s.name).group for s in results.saved):  # a PNG each
        members = [s for s in results.saved if _entry(s.name).group == group]
        folder = (c.out_dir or h.ROOT / "bench_results") if c.quick else h.ROOT / "figures"
        path = save_figure(group_panels(members), folder / f"results_{group}.png", True)
        if path is not None:
            link = Path(os.path.relpath(path.resolve(), c.benchmarks_md.parent.resolve()))
            blocks.append(f"![{group}: return against steps and wall time]({link.as_posix()})")
    if results.stopped:
        blocks.append(f"This invocation stopped: {results.stopped}; the next one carries on.")
    keys = [f"{s.name}: {result_cell(s, c.final_evals)} ({s.status})" for s in results.saved]
    return h.Report(
        f"Whole runs with the defaults, beside the published numbers (`{h.PROG} results`)",
        "; ".join(keys) or "no run yet",
        blocks,
    )
