"""`python -m benchmarks pixels`: learning from images against SB3: `minatar` (a
learning comparison on MinAtar games) and `pong` (agent steps/s of the whole training
pipeline over a slice of wall time after the first update).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from benchmarks.lib import compare, sb3, sf_anchor, training
from benchmarks.lib import harness as h
from benchmarks.lib.compare import NEVER, Comparison, Outcome, System
from benchmarks.lib.figures import Panel
from benchmarks.lib.training import Point

PPO_ENVS = {"workers": 2, "envs_per_worker": 4}  # 8 envs, as SB3's (`lib.sb3.PPO_ENVS`)
ROW = Comparison(
    name="pixels", title="MinAtar: learning against SB3 at the same budget",
    systems=(
        System("pararl-dqn", "pararl DQN (async)", "dqn", {"mode": "async"}, color="C0"),
        System("pararl-dqn-per", "pararl DQN (async, prioritized)", "dqn",
               {"mode": "async", "prioritized": True}, color="C2"),
        System("pararl-ppo", "pararl PPO", "ppo", PPO_ENVS, color="C4"),
        # Pong only: the 8 envs on actor processes, one rollout ahead of the update
        System("pararl-ppo-async", "pararl PPO (async)", "ppo", {"mode": "async", "num_envs": 8},
               default=False, color="C5"),
        System("sb3-dqn", "SB3 DQN", "dqn", anchor="minatar", color="C1"),
        System("sb3-ppo", "SB3 PPO", "ppo", anchor="minatar", color="C3"),
    ),
    runs=tuple(f"MinAtar/{game}-v1:{seed}" for seed in range(3)
               for game in ("Breakout", "SpaceInvaders")),
    budget=200_000, eval_every=10_000, final_evals=2,
    quick=dict(runs=("MinAtar/Breakout-v1:0",), budget=2_048, eval_every=1_024, eval_episodes=2,
               final_evals=1, run_timeout_s=300.0),
    notes=(
        "Evaluations with sticky actions 0.1, as in training. pararl: `pararl train dqn --mode "
        "async [--prioritized]` and `pararl train ppo` (2 workers x 4 envs) with their MinAtar "
        "defaults (async DQN on 2 cores: one actor of 4 envs, loading the learner's weights "
        "every 16 of its steps). SB3: the same settings read from pararl's config (DQN: "
        "centred RMSProp lr 2.5e-4, batch 32, one update per step from 5,000 steps, target "
        "every 1,000 updates, epsilon to 0.1 over 100k steps; PPO: 8 envs x 128 steps, 4 "
        "epochs of 256, lr 2.5e-4 annealed, clip 0.1, entropy 0.01, GAE 0.95) on pararl's own "
        "MinAtar envs, with a features extractor that is the MinAtar paper's network (one 3x3 "
        "convolution with 16 filters, 128 hidden units; channels-last boolean planes, moved "
        "first inside the network as pararl does)."
    ),
    # The MinAtar paper's (Young & Tian 2019) README plots at 5M frames, read off by eye,
    # with sticky actions; PPO at 10M steps from gymnax's MinAtar baselines (no sticky
    # actions)
    published=("game", "DQN (5M)", "actor-critic (5M)", "PPO gymnax (10M)"),
    figures={"Breakout": ("~10", "~17.5", "28"), "SpaceInvaders": ("~43", "~185", "131"),
             "Asterix": ("~17", "–", "–"), "Seaquest": ("~20", "–", "–"),
             "Freeway": ("~50", "–", "–")},
    published_note=(
        "Published MinAtar returns for reference (not re-measured; far longer budgets): the "
        "MinAtar paper's DQN and actor-critic at 5M frames, read off its README's plots; "
        "gymnax's PPO at 10M steps without sticky actions."
    ),
)  # fmt: skip
# Pong only: Sample Factory's asynchronous PPO, 2 workers x 4 envs (`lib.sf_anchor`)
SF_APPO = System("sf-appo", "Sample Factory APPO", "ppo", anchor="sample-factory", color="C6")
PONG = {s.name: s for s in (*ROW.systems, SF_APPO)}
PongSystem = Literal[
    "pararl-dqn", "sb3-dqn", "pararl-ppo", "pararl-ppo-async", "sb3-ppo", "sf-appo"
]


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """MinAtar learning against SB3 (same budget, same settings), and Pong training
    throughput against SB3 zoo. --quick: Breakout, one seed, 2,048 steps; a 5 s slice."""

    parts: tuple[Literal["minatar", "pong"], ...] = ("minatar", "pong")  # Parts to run.
    pong_systems: tuple[PongSystem, ...] = ("pararl-dqn", "sb3-dqn", "pararl-ppo", "sb3-ppo")
    """pong: systems, run in this order."""
    slice_s: float = 60.0  # pong: wall seconds measured, from each run's first gradient update.
    learning_starts: int = 1_000  # pong: DQN's learning starts (small: the slice learns).


QUICK: dict[str, Any] = dict(slice_s=5.0, learning_starts=200)
# Pong for pararl (frame skip 4, no sticky actions) and SB3 (the zoo's; `AtariWrapper`
# skips the frames); a run killed after PONG_TIMEOUT_S
PONG_ENV, SB3_PONG_ENV, PONG_TIMEOUT_S = "ALE/Pong-v5", "PongNoFrameskip-v4", 600.0


def resolve(config: Config) -> Config:
    c = h.apply_quick(compare.resolve(ROW, config), QUICK)
    h.require(c, "> 0: slice_s", ">= 0: learning_starts parts")
    h.check([("pong" in c.parts and not c.pong_systems, "--pong-systems needs at least one value")])
    for run in c.runs:
        h.check([(not run.startswith("MinAtar/"), f"--runs: '{run}' is not a MinAtar/ id")])
    return c


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


def pong_slice(system: str, c: Config, workdir: Path) -> Slice:
    """One Pong throughput run of `system`: pararl's `pararl train` or Sample Factory's
    APPO until `c.slice_s` after its first update, then stopped (SIGTERM: pararl finishes
    cleanly, exit status 143), or SB3's process timing its own slice; each stopped
    `PONG_TIMEOUT_S` after launch. Sample Factory is timed by the reports it logs (agent
    steps; it logs no update count)."""
    s = PONG[system]
    if s.anchor and s is not SF_APPO:
        flags = {"env": SB3_PONG_ENV, "slice_s": c.slice_s, "learning_starts": c.learning_starts}
        done = training.run_process(sb3.command(s.algo, "pong", **flags), PONG_TIMEOUT_S, workdir)
        parsed = sb3.parse(done.stdout, s.algo)
        run = Slice(system, [tuple(p) for p in parsed["points"]] if parsed else [])
        run.note = done.tail if parsed is None or done.returncode != 0 else ""
    else:
        log = workdir / f"{system}-pong.log"
        out = log.with_suffix("")

        def points() -> list[Point]:
            if s is SF_APPO:
                return sf_anchor.points(log.read_text(errors="replace"))
            return training.clock(training.read_metrics(out))

        if s is SF_APPO:
            try:
                cmd = sf_anchor.command("atari_pong", workdir / "sf", workers=2, envs_per_worker=4)
            except FileNotFoundError as exc:
                return Slice(system, note=str(exc))
        else:
            more = {"learning_starts": c.learning_starts} if s.algo == "dqn" else {}
            cmd = training.train_command(
                s.algo, total_steps=NEVER, eval_every=NEVER, checkpoint_every=NEVER,
                log_every_s=1.0, target_return=NEVER, **more, env=PONG_ENV, seed=0, run_dir=out,
                progress="plain", tensorboard=False, **s.flags,
            )  # fmt: skip

        def sliced() -> bool:
            now = points()
            first = next((p[0] for p in now if p[2] > 0), None)
            return first is not None and now[-1][0] - first >= c.slice_s

        deadline = time.monotonic() + PONG_TIMEOUT_S
        how, code, text = training.run_until(cmd, log, workdir, deadline, sliced)
        if how == "interrupted":
            raise KeyboardInterrupt
        run = Slice(system, points())
        if how == "deadline":
            run.note = f"stopped after {PONG_TIMEOUT_S:g} s"
        elif how == "ended" and code not in (0, 143):
            run.note = f"rc {code}: " + " | ".join(text.strip().splitlines()[-3:])
    measured = window_rate(run.points, c.slice_s)
    if measured is not None:
        run.rate, run.window_s, run.updates_per_s = measured
    elif not run.note:
        run.note = "no update within the run"
    if s is SF_APPO:
        run.updates_per_s = None  # its reports count no updates
    return run


def vs_anchor(piece: Slice, slices: Sequence[Slice], anchor: str = "sb3") -> float | None:
    """A pararl run's agent steps/s ÷ that of `anchor`'s run of the same algorithm
    (`sb3`: SB3's; `sf`: Sample Factory's APPO)."""
    name = f"sb3-{PONG[piece.system].algo}" if anchor == "sb3" else SF_APPO.name
    theirs = next((s for s in slices if s.system == name), None)
    return None if theirs is None else h.ratio(piece.rate, theirs.rate)


def pong_block(slices: Sequence[Slice], p: dict[str, Any]) -> str:
    def ratio(piece: Slice) -> str:
        return h.fmt_ratio(vs_anchor(piece, slices))

    cols: list[h.Col[Slice]] = [
        h.Col("system", lambda s: PONG[s.system].label, "l"),
        h.Col("agent steps/s", lambda s: h.fmt_rate(s.rate)),
        h.Col("seconds measured", lambda s: h.fmt_num(s.window_s, 0)),
        h.Col("÷ SB3 (target)", lambda s: ratio(s) if s.system.startswith("pararl") else ""),
        h.Col("÷ Sample Factory APPO", lambda s: h.fmt_ratio(vs_anchor(s, slices, "sf"))
              if s.system.startswith("pararl-ppo") else ""),
        h.Col("note", lambda s: s.note[-80:], "l"),
    ]  # fmt: skip
    notes = (
        f"Agent steps (4 frames each) per second of the whole training pipeline, acting and "
        f"learning, over the {p['slice_s']:g} s that follow each run's first gradient update; "
        f"no evaluations. pararl: `pararl train dqn --mode async` and `pararl train ppo` (2 "
        f"workers x 4 envs; async: the 8 envs on actor processes, one rollout ahead of the "
        f"update) on {PONG_ENV} with their Atari defaults. SB3: the zoo's Atari "
        f"settings on {SB3_PONG_ENV} (`AtariWrapper`, 4 stacked frames, `CnnPolicy`; DQN "
        "one env, an update every 4 steps, batch 32; PPO 8 `DummyVecEnv` envs x 128 steps, 4 "
        f"epochs of 256). DQN's learning starts at {p['learning_starts']:,} steps for both "
        "(the zoo's 100,000 would leave no learning in the slice). Sample Factory: APPO "
        "with its Atari settings (CleanRL's PPO: 128-step rollouts, 4 epochs of 4 minibatches "
        "of 256) on its `atari_pong` (PongNoFrameskip-v4, DeepMind wrappers, 4 stacked "
        "frames), asynchronous, 2 workers x 4 envs, on the CPU, in its own environment "
        "(`make venv-sf`), timed by the agent steps of the reports it logs. One run each. "
        "Targets: DQN ≥ 1.0×, PPO ≥ 1.5× SB3 zoo's agent steps/s; PPO async ≥ 2× Sample "
        "Factory's."
    )
    title = "### Pong: training pipeline throughput against SB3 zoo and Sample Factory"
    return f"{title}\n\n{notes}\n\n{h.table(cols, slices)}"


@dataclass
class Result:
    minatar: Outcome | None = None
    slices: list[Slice] = field(default_factory=list)


def measure(c: Config, meta: h.Metadata) -> Result:
    out = Result()
    if "minatar" in c.parts:
        out.minatar = compare.measure(ROW, c, meta)
    with tempfile.TemporaryDirectory(prefix="pararl-bench-pixels-") as tmp:
        for pong in c.pong_systems if "pong" in c.parts else ():
            h.progress(f"pixels: {pong} on Pong, {c.slice_s:g} s after its first update ...")
            piece = pong_slice(pong, c, Path(tmp))
            out.slices.append(piece)
            h.progress(f"pixels: {pong} on Pong: {h.fmt_rate(piece.rate)} agent steps/s")
    return out


def report(result: Result, meta: h.Metadata) -> h.Report:
    p = meta.params
    ratios, blocks, panels = "", list[str](), list[Panel]()
    if result.minatar is not None:
        ratios, blocks, panels = compare.report(ROW, result.minatar, SimpleNamespace(**p))
    if result.slices:
        blocks.append(pong_block(result.slices, p))
        pong = [
            f"Pong {PONG[s.system].label} agent steps/s ÷ SB3 zoo "
            + h.fmt_ratio(vs_anchor(s, result.slices))
            for s in result.slices
            if s.system.startswith("pararl")
        ]
        by_name = {s.system: s for s in result.slices}
        if {"pararl-ppo", "pararl-ppo-async"} <= by_name.keys():
            overlap = h.ratio(by_name["pararl-ppo-async"].rate, by_name["pararl-ppo"].rate)
            pong.append(f"Pong pararl PPO async ÷ its sync {h.fmt_ratio(overlap)} (target ≥ 1.3)")
        if "pararl-ppo-async" in by_name and SF_APPO.name in by_name:
            sf = h.fmt_ratio(vs_anchor(by_name["pararl-ppo-async"], result.slices, "sf"))
            pong.append(f"Pong pararl PPO async ÷ Sample Factory APPO {sf} (target ≥ 2)")
        ratios = "; ".join([r for r in (ratios,) if r] + pong)
    return h.Report(
        f"Learning from images against SB3: MinAtar, Pong throughput (`{h.PROG} pixels`)",
        ratios or "nothing measured",
        blocks,
        panels,
        figure_alt="MinAtar return against env steps and wall time",
        legend_below=True,
    )
