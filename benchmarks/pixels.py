"""`python -m benchmarks pixels`: learning from images against SB3, in two parts.

1. `minatar`: MinAtar games (10x10 object planes), whole training processes for the
   same env-step budget, interleaved (seed 0: every system, seed 1: ...): pararl DQN
   (async, uniform and prioritized replay) and PPO with their MinAtar defaults, and
   SB3 DQN and PPO with the same settings and the MinAtar paper's network
   (`lib.sb3`). Return against env steps and wall time, the final return, and how
   long pararl takes to reach the return SB3 ends with.
2. `pong`: agent steps/s of the whole training pipeline (acting and learning) on
   Pong, pararl's Atari defaults against SB3 zoo's Atari settings, over a slice of
   wall time that starts at each run's first gradient update (pararl stopped by
   SIGTERM, which it answers by finishing cleanly; SB3 by its callback), agent steps/s
   read over that slice the same way for both (`window_rate`).
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmarks.lib import harness as h
from benchmarks.lib import sb3, training
from benchmarks.lib.figures import Panel, Series
from benchmarks.lib.stats import censored_median
from benchmarks.lib.training import Point, Run, time_to_reach

System = Literal[
    "pararl-dqn",
    "pararl-dqn-per",
    "pararl-dqn-1env",
    "pararl-dqn-serial",
    "pararl-dqn-serial-lag",
    "pararl-ppo",
    "sb3-dqn",
    "sb3-ppo",
]
PongSystem = Literal["pararl-dqn", "sb3-dqn", "pararl-ppo", "pararl-ppo-compile", "sb3-ppo"]
LABELS = {
    "pararl-dqn": "pararl DQN (async)",
    "pararl-dqn-per": "pararl DQN (async, prioritized)",
    "pararl-dqn-1env": "pararl DQN (async, 1 env)",
    "pararl-dqn-serial": "pararl DQN (serial, 1 env)",
    "pararl-dqn-serial-lag": "pararl DQN (serial, 1 env, acting 180 updates behind)",
    "pararl-ppo": "pararl PPO",
    "pararl-ppo-compile": "pararl PPO (--compile on)",
    "sb3-dqn": "SB3 DQN",
    "sb3-ppo": "SB3 PPO",
}
COLORS = {
    "pararl-dqn": "C0",
    "pararl-dqn-per": "C2",
    "pararl-dqn-1env": "C5",
    "pararl-dqn-serial": "C6",
    "pararl-dqn-serial-lag": "C7",
    "pararl-ppo": "C4",
    "pararl-ppo-compile": "C8",
    "sb3-dqn": "C1",
}
# SB3's DQN steps one env and learns between its steps; pararl's async DQN on 2 cores
# steps 4 envs in its actor, which loads the learner's weights every 16 of its steps.
# These take one difference away at a time: one env, then no actor at all; and the
# last puts back only the actor's policy lag, in one process (`--acting-lag`: the
# ~180 updates an async actor acts behind at MinAtar's one update per step).
ASYNC_LAG = 180
ONE_ENV: dict[str, dict[str, object]] = {
    "pararl-dqn-1env": {"mode": "async", "workers": 1, "envs_per_worker": 1},
    "pararl-dqn-serial": {"mode": "serial", "workers": 1, "envs_per_worker": 1},
    "pararl-dqn-serial-lag": {
        "mode": "serial",
        "workers": 1,
        "envs_per_worker": 1,
        "acting_lag": ASYNC_LAG,
    },
}
# The MinAtar paper's (Young & Tian 2019) README plots at 5M frames, read off by eye, with
# sticky actions; PPO at 10M steps from gymnax's MinAtar baselines (no sticky actions).
PAPER: dict[str, dict[str, str]] = {
    "Breakout": {"DQN (5M)": "~10", "actor-critic (5M)": "~17.5", "PPO gymnax (10M)": "28"},
    "SpaceInvaders": {"DQN (5M)": "~43", "actor-critic (5M)": "~185", "PPO gymnax (10M)": "131"},
    "Asterix": {"DQN (5M)": "~17", "actor-critic (5M)": "–", "PPO gymnax (10M)": "–"},
    "Seaquest": {"DQN (5M)": "~20", "actor-critic (5M)": "–", "PPO gymnax (10M)": "–"},
    "Freeway": {"DQN (5M)": "~50", "actor-critic (5M)": "–", "PPO gymnax (10M)": "–"},
}


@dataclass(frozen=True)
class Config(h.Options):
    """MinAtar learning against SB3 (same budget, same settings), and Pong training
    throughput against SB3 zoo. --quick: Breakout, one seed, 2,048 steps; a 5 s slice."""

    parts: tuple[Literal["minatar", "pong"], ...] = ("minatar", "pong")
    """Parts to run."""
    envs: tuple[str, ...] = ("MinAtar/Breakout-v1", "MinAtar/SpaceInvaders-v1")
    """minatar: games."""
    systems: tuple[System, ...] = (
        "pararl-dqn",
        "pararl-dqn-per",
        "pararl-ppo",
        "sb3-dqn",
        "sb3-ppo",
    )
    """minatar: systems, each run once per game and seed."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """minatar: training seeds."""
    budget: int = 200_000
    """minatar: env steps per run."""
    eval_every: int = 10_000
    """minatar: env steps between deterministic evaluations."""
    eval_episodes: int = 10
    """minatar: episodes per evaluation."""
    final_evals: int = 2
    """minatar: the final return is the mean of this many last evaluations."""
    run_timeout_s: float = 7_200.0
    """minatar: a run is killed after this long (and reported as failed)."""
    pong_systems: tuple[PongSystem, ...] = ("pararl-dqn", "sb3-dqn", "pararl-ppo", "sb3-ppo")
    """pong: systems, run in this order."""
    pong_env: str = "ALE/Pong-v5"
    """pong: pararl's env id (pararl sets frame skip 4 and no sticky actions itself)."""
    sb3_pong_env: str = "PongNoFrameskip-v4"
    """pong: SB3's env id (the zoo's; `AtariWrapper` skips the frames)."""
    slice_s: float = 60.0
    """pong: wall seconds measured, from each run's first gradient update."""
    learning_starts: int = 1_000
    """pong: DQN's learning starts, both systems (small, so that the slice measures learning)."""
    pong_timeout_s: float = 600.0
    """pong: a run is killed after this long."""


QUICK: dict[str, Any] = dict(
    envs=("MinAtar/Breakout-v1",), seeds=(0,), budget=2_048, eval_every=1_024, eval_episodes=2,
    final_evals=1, run_timeout_s=300.0, slice_s=5.0, learning_starts=200, pong_timeout_s=180.0,
)  # fmt: skip


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    h.require(c, ">= 1: budget eval_every eval_episodes final_evals", ">= 0: parts seeds")
    h.require(c, "> 0: run_timeout_s slice_s pong_timeout_s", ">= 0: learning_starts")
    h.check(
        [
            ("minatar" in c.parts and not c.systems, "--systems needs at least one value"),
            ("minatar" in c.parts and not c.envs, "--envs needs at least one value"),
            ("pong" in c.parts and not c.pong_systems, "--pong-systems needs at least one value"),
        ]
    )
    for env in c.envs:
        h.check([(not env.startswith("MinAtar/"), f"--envs: '{env}' is not a MinAtar/ id")])
    return c


PPO_WORKERS, PPO_ENVS_PER_WORKER = 2, 4  # 8 envs, as SB3's (`lib.sb3.PPO_ENVS`)
NEVER = 10**12  # a step count no run reaches: no evaluation, no checkpoint, no target


def algo_of(system: str) -> str:
    """`pararl-dqn-per` -> `dqn`."""
    return system.split("-")[1]


@dataclass(frozen=True)
class Budget:
    """A MinAtar run's budget and evaluations."""

    steps: int
    eval_every: int
    eval_episodes: int
    timeout_s: float


def pararl_command(system: str, env: str, run_dir: Path, **flags: object) -> list[str]:
    """`pararl train ALGO` for `system` (`pararl-dqn`: async DQN, `pararl-dqn-per`: with
    prioritized replay, `-1env`, `-serial`, `-serial-lag`: `ONE_ENV`, `pararl-ppo`: 8 envs,
    `-compile`: `--compile on`), its defaults otherwise."""
    algo = algo_of(system)
    common = {"env": env, "run_dir": run_dir, "progress": "plain", **flags}
    if system.endswith("-compile"):
        common["compile"] = "on"
    if system in ONE_ENV:
        common |= ONE_ENV[system]
    elif algo == "dqn":
        common["mode"] = "async"
    else:
        common |= {"workers": PPO_WORKERS, "envs_per_worker": PPO_ENVS_PER_WORKER}
    extra = ["--prioritized"] if system.endswith("-per") else []
    return training.train_command(algo, *extra, "--no-tensorboard", **common)


def minatar_run(system: str, env: str, seed: int, b: Budget, workdir: Path) -> Run:
    """One whole MinAtar run of `system`, launch to exit, with its curve on that clock."""
    flags = {"seed": seed, "eval_every": b.eval_every, "eval_episodes": b.eval_episodes}
    if system.startswith("sb3"):
        cmd = sb3.command(algo_of(system), "minatar", env=env, budget=b.steps, **flags)
        run, result = sb3.curve_run(system, env, seed, algo_of(system), cmd, b.timeout_s, workdir)
        own_s = None if result is None else result["train_s"]
    else:
        out = Run.directory(system, env, seed, workdir)
        cmd = pararl_command(system, env, out, total_steps=b.steps, target_return=NEVER, **flags)
        run, done = Run.of(system, env, seed, cmd, b.timeout_s, workdir)
        final = training.parse_final(done.stderr)
        own_s = None if final is None else final["train_s"]
    training.launch_clock(run.curve, run.wall_s, own_s)
    return run


@dataclass
class Slice:
    """One Pong run's clock and its agent steps/s over the slice after its first update."""

    system: str
    points: list[Point] = field(default_factory=list)
    rate: float | None = None
    window_s: float | None = None
    updates_per_s: float | None = None
    note: str = ""


def window_rate(points: Sequence[Point], slice_s: float) -> tuple[float, float, float] | None:
    """(agent steps/s, seconds measured, updates/s) from the first point with an update
    to the last one within `slice_s` of it; None without two such points."""
    start = next((i for i, p in enumerate(points) if p[2] > 0), None)
    if start is None:
        return None
    t0, s0, u0 = points[start]
    inside = [p for p in points[start + 1 :] if p[0] - t0 <= slice_s * 1.05]
    if not inside:
        return None
    t1, s1, u1 = inside[-1]
    return (s1 - s0) / (t1 - t0), t1 - t0, (u1 - u0) / (t1 - t0)


def pararl_slice(system: str, env: str, learning_starts: int, slice_s: float,
                 timeout_s: float, workdir: Path) -> Slice:  # fmt: skip
    """`pararl train` on Pong until `slice_s` after its first update, then SIGTERM; the
    run is killed (with its process group) if it has not finished `timeout_s` after
    launch."""
    out = workdir / f"{system}-pong"
    flags: dict[str, object] = dict(
        total_steps=NEVER, eval_every=NEVER, checkpoint_every=NEVER, log_every_s=1.0,
        target_return=NEVER,
    )  # fmt: skip
    if algo_of(system) == "dqn":
        flags["learning_starts"] = learning_starts
    cmd = pararl_command(system, env, out, seed=0, **flags)
    proc = training.start(cmd, workdir, subprocess.DEVNULL)
    deadline, result = time.monotonic() + timeout_s, Slice(system)
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(1.0)
        points = training.clock(training.read_metrics(out))
        first = next((p[0] for p in points if p[2] > 0), None)
        if first is not None and points[-1][0] - first >= slice_s:
            proc.send_signal(signal.SIGTERM)  # pararl finishes cleanly (exit status 143)
            break
    try:
        _, err = proc.communicate(timeout=max(deadline - time.monotonic(), 30.0))
    except subprocess.TimeoutExpired:
        _, err = training.kill(proc)
        result.note = f"killed after {timeout_s:g} s"
    result.points = training.clock(training.read_metrics(out))
    if proc.returncode not in (0, 143) and not result.note:
        result.note = f"rc {proc.returncode}: " + " | ".join(err.strip().splitlines()[-3:])
    return result


def sb3_slice(system: str, env: str, learning_starts: int, slice_s: float,
              timeout_s: float, workdir: Path) -> Slice:  # fmt: skip
    flags = {"env": env, "slice_s": slice_s, "learning_starts": learning_starts}
    done = training.run_process(sb3.command(algo_of(system), "pong", **flags), timeout_s, workdir)
    parsed = sb3.parse(done.stdout, algo_of(system))
    result = Slice(system, [tuple(p) for p in parsed["points"]] if parsed else [])
    if parsed is None or done.returncode != 0:
        result.note = done.tail
    return result


def pong_slice(system: str, envs: tuple[str, str], learning_starts: int, slice_s: float,
               timeout_s: float, workdir: Path) -> Slice:  # fmt: skip
    """One Pong throughput run of `system` (`envs`: pararl's id, SB3's id)."""
    if system.startswith("sb3"):
        run = sb3_slice(system, envs[1], learning_starts, slice_s, timeout_s, workdir)
    else:
        run = pararl_slice(system, envs[0], learning_starts, slice_s, timeout_s, workdir)
    measured = window_rate(run.points, slice_s)
    if measured is not None:
        run.rate, run.window_s, run.updates_per_s = measured
    elif not run.note:
        run.note = "no update within the run"
    return run


@dataclass
class Result:
    runs: list[Run] = field(default_factory=list)
    slices: list[Slice] = field(default_factory=list)


def measure(c: Config, meta: h.Metadata) -> Result:
    del meta
    out = Result()
    budget = Budget(c.budget, c.eval_every, c.eval_episodes, c.run_timeout_s)
    with tempfile.TemporaryDirectory(prefix="pararl-bench-pixels-") as tmp:
        if not c.quick:  # timed claims only: the first run should not pay for a cold cache
            training.warm_up(Path(tmp))
        for seed in c.seeds if "minatar" in c.parts else ():
            for env in c.envs:
                for system in c.systems:
                    h.progress(f"pixels: {system} {env} seed {seed} ...")
                    out.runs.append(run := minatar_run(system, env, seed, budget, Path(tmp)))
                    final = run.final(c.final_evals)
                    shown = "failed" if final is None else f"final {final:.1f}"
                    h.progress(f"pixels: {system} {env} seed {seed}: {shown}, {run.wall_s:.0f} s")
        for pong in c.pong_systems if "pong" in c.parts else ():
            h.progress(f"pixels: {pong} on Pong, {c.slice_s:g} s after its first update ...")
            envs = (c.pong_env, c.sb3_pong_env)
            piece = pong_slice(
                pong, envs, c.learning_starts, c.slice_s, c.pong_timeout_s, Path(tmp)
            )
            out.slices.append(piece)
            h.progress(f"pixels: {pong} on Pong: {h.fmt_rate(piece.rate)} agent steps/s")
    return out


@dataclass
class Row:
    """One system on one game over its seeds."""

    env: str
    system: str
    runs: int
    final: h.Summary | None
    wall: h.Summary | None  # launch to exit
    sb3_final: float | None = None  # what the SB3 run of the same algorithm ends with
    reach_s: float | None = None  # median time to reach it (None: median never)
    reached: int = 0
    vs_sb3: float | None = None  # reach_s / SB3's median wall


def rows(runs: Sequence[Run], final_evals: int) -> list[Row]:
    out = []
    for env in dict.fromkeys(r.env for r in runs):
        for system in dict.fromkeys(r.system for r in runs if r.env == env):
            mine = [r for r in runs if r.env == env and r.system == system and r.curve]
            finals = [f for r in mine if (f := r.final(final_evals)) is not None]
            walls = [r.wall_s for r in mine]
            n = sum(r.env == env and r.system == system for r in runs)
            out.append(Row(env, system, n, h.maybe(finals), h.maybe(walls)))
    for row in out:
        sb3 = next(
            (r for r in out if r.env == row.env and r.system == f"sb3-{algo_of(row.system)}"), None
        )
        if sb3 is None or sb3.final is None or row.system.startswith("sb3"):
            continue
        row.sb3_final = sb3.final.median
        times = [
            time_to_reach(r, sb3.final.median)
            for r in runs
            if r.env == row.env and r.system == row.system and r.curve
        ]
        row.reached = sum(t != float("inf") for t in times)
        row.reach_s = censored_median(times)
        row.vs_sb3 = h.ratio(row.reach_s, sb3.wall)
    return out


def game(env: str) -> str:
    return env.split("/")[-1].split("-")[0]


def minatar_block(result: Result, table_rows: list[Row], p: dict[str, Any]) -> str:
    n = p["final_evals"]

    def reach(r: Row) -> str:
        if r.sb3_final is None:
            return "–"
        return h.fmt_num(r.reach_s, 0) if r.reach_s is not None else "not reached"

    def seeds(r: Row) -> str:
        return "–" if r.sb3_final is None else f"{r.reached}/{r.runs}"

    def num(v: float) -> str:
        return h.fmt_num(v)

    cols: list[h.Col[Row]] = [
        h.Col("game", lambda r: game(r.env), "l"),
        h.Col("system", lambda r: LABELS[r.system], "l"),
        h.Col("runs", lambda r: r.runs),
        h.Col(f"final (last {n} evals), median (min–max)", lambda r: h.fmt_spread(r.final, num)),
        h.Col("wall s, launch to exit", lambda r: h.fmt_spread(r.wall, lambda v: f"{v:.0f}")),
        h.Col("SB3's final", lambda r: h.fmt_num(r.sb3_final)),
        h.Col("time to reach it, median (s)", reach),
        h.Col("seeds reaching it", seeds),
        h.Col("÷ SB3 wall (target ≤ 0.5)", lambda r: h.fmt_ratio(r.vs_sb3)),
    ]  # fmt: skip
    run_cols: list[h.Col[Run]] = [
        h.Col("game", lambda r: game(r.env), "l"),
        h.Col("system", lambda r: LABELS[r.system], "l"),
        h.Col("seed", lambda r: r.seed),
        h.Col("final", lambda r: h.fmt_num(r.final(n))),
        h.Col("wall, launch to exit (s)", lambda r: h.fmt_num(r.wall_s, 0)),
        h.Col("env steps/s", lambda r: h.fmt_rate(r.env_steps / r.wall_s if r.wall_s else None)),
        h.Col("updates", lambda r: f"{r.updates:,}"),
        h.Col("note", lambda r: r.note[-80:], "l"),
    ]
    notes = (
        f"Budget {p['budget']:,} env steps per run, {len(p['seeds'])} seed(s); deterministic "
        f"evaluation every {p['eval_every']:,} steps ({p['eval_episodes']} episodes, sticky "
        "actions 0.1 as in training). pararl: `pararl train dqn --mode async [--prioritized]` "
        "and `pararl train ppo` (2 workers x 4 envs) with their MinAtar defaults (async DQN on "
        "2 cores: one actor of 4 envs, loading the learner's weights every 16 of its steps; "
        "`1 env`: `--workers 1 --envs-per-worker 1`; `serial, 1 env`: also `--mode serial`, "
        f"learning between the env's steps as SB3 does; `acting {ASYNC_LAG} updates behind`: "
        f"also `--acting-lag {ASYNC_LAG}`). SB3: the "
        "same settings read from pararl's config (DQN: centred RMSProp lr 2.5e-4, batch 32, "
        "one update per step from 5,000 steps, target every 1,000 updates, epsilon to 0.1 over "
        "100k steps; PPO: 8 envs x 128 steps, 4 epochs of 256, lr 2.5e-4 annealed, clip 0.1, "
        "entropy 0.01, GAE 0.95) on pararl's own MinAtar envs, with a features extractor that "
        "is the MinAtar paper's network (one 3x3 convolution with 16 filters, 128 hidden units; "
        "channels-last boolean planes, moved first inside the network as pararl does). Final "
        "return: mean of the last evaluations, median of seeds. Wall times are launch to exit; a "
        "curve's points are on that clock, with all the time its process spent outside its own "
        "training clock counted as start-up. Time to reach SB3's final: a run's first "
        "evaluation at or above it (a run that never reaches it counts as never), against "
        "SB3's median wall."
    )
    summary, each = h.table(cols, table_rows), h.table(run_cols, result.runs)
    title = "### MinAtar: learning against SB3 at the same budget"
    return f"{title}\n\n{notes}\n\n{summary}\n\nRuns, in the order run:\n\n{each}"


def paper_block(envs: Sequence[str]) -> str:
    games = [g for g in dict.fromkeys(game(e) for e in envs) if g in PAPER]
    heads = ["game", *next(iter(PAPER.values()))]
    data = [[g, *PAPER[g].values()] for g in games]
    return (
        "Published MinAtar returns for reference (not re-measured; far longer budgets): the "
        "MinAtar paper's DQN and actor-critic at 5M frames, read off its README's plots; "
        "gymnax's PPO at 10M steps without sticky actions.\n\n" + h.text_table(heads, data)
    )


def vs_sb3(piece: Slice, slices: Sequence[Slice]) -> float | None:
    """A pararl run's agent steps/s ÷ that of SB3's run of the same algorithm."""
    sb3 = next((s for s in slices if s.system == f"sb3-{algo_of(piece.system)}"), None)
    return None if sb3 is None else h.ratio(piece.rate, sb3.rate)


def pong_block(slices: Sequence[Slice], p: dict[str, Any]) -> str:
    def ratio(piece: Slice) -> str:
        return h.fmt_ratio(vs_sb3(piece, slices))

    cols: list[h.Col[Slice]] = [
        h.Col("system", lambda s: LABELS[s.system], "l"),
        h.Col("agent steps/s", lambda s: h.fmt_rate(s.rate)),
        h.Col("seconds measured", lambda s: h.fmt_num(s.window_s, 0)),
        h.Col("÷ SB3 (target)", lambda s: "" if s.system.startswith("sb3") else ratio(s)),
        h.Col("note", lambda s: s.note[-80:], "l"),
    ]  # fmt: skip
    notes = (
        f"Agent steps (4 frames each) per second of the whole training pipeline, acting and "
        f"learning, over the {p['slice_s']:g} s that follow each run's first gradient update; "
        f"no evaluations. pararl: `pararl train dqn --mode async` and `pararl train ppo` (2 "
        f"workers x 4 envs) on {p['pong_env']} with their Atari defaults. SB3: the zoo's Atari "
        f"settings on {p['sb3_pong_env']} (`AtariWrapper`, 4 stacked frames, `CnnPolicy`; DQN "
        "one env, an update every 4 steps, batch 32; PPO 8 `DummyVecEnv` envs x 128 steps, 4 "
        f"epochs of 256). DQN's learning starts at {p['learning_starts']:,} steps for both "
        "(the zoo's 100,000 would leave no learning in the slice). One run each. Targets: "
        "DQN ≥ 1.0×, PPO ≥ 1.5× SB3 zoo's agent steps/s."
    )
    title = "### Pong: training pipeline throughput against SB3 zoo"
    return f"{title}\n\n{notes}\n\n{h.table(cols, slices)}"


def curve_panels(runs: Sequence[Run]) -> list[Panel]:
    """Return against env steps and against wall time per game: one line per run, the
    legend names each system once."""
    panels = []
    for env in dict.fromkeys(r.env for r in runs):
        named = {r.system: r for r in runs if r.env == env and r.curve}
        for axis, label in (("env_steps", "env steps"), ("wall_s", "wall time (s)")):
            series = [
                Series(
                    LABELS[r.system] if named[r.system] is r else None,
                    [q[axis] for q in r.curve],
                    [q["eval_return"] for q in r.curve],
                    fmt="-" if r.system.startswith("pararl") else "--",
                    color=COLORS.get(r.system, "C3"),
                )
                for r in runs
                if r.env == env and r.curve
            ]
            panels.append(Panel(f"{game(env)}: return vs {label}", series, label, "eval return"))
    return panels


def ratios(table_rows: Sequence[Row], slices: Sequence[Slice]) -> str:
    parts = [
        f"{game(r.env)} {LABELS[r.system]}: time to SB3's final {h.fmt_num(r.sb3_final)} ÷ SB3 "
        f"wall {h.fmt_ratio(r.vs_sb3) if r.vs_sb3 is not None else 'not reached'}, final "
        f"{h.fmt_num(h.med(r.final))}"
        for r in table_rows
        if r.sb3_final is not None
    ]
    parts += [
        f"Pong {LABELS[s.system]} agent steps/s ÷ SB3 zoo {h.fmt_ratio(vs_sb3(s, slices))}"
        for s in slices
        if s.system.startswith("pararl")
    ]
    return "; ".join(parts) or "nothing measured"


def report(result: Result, meta: h.Metadata) -> h.Report:
    p = meta.params
    table_rows = rows(result.runs, p["final_evals"])
    blocks = []
    if result.runs:
        blocks += [minatar_block(result, table_rows, p), paper_block([r.env for r in result.runs])]
    if result.slices:
        blocks.append(pong_block(result.slices, p))
    return h.Report(
        f"Learning from images against SB3: MinAtar, Pong throughput (`{h.PROG} pixels`)",
        ratios(table_rows, result.slices),
        blocks,
        curve_panels(result.runs),
        figure_alt="MinAtar return against env steps and wall time",
        legend_below=True,
    )
