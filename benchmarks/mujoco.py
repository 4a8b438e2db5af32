"""`python -m benchmarks mujoco`: PPO on MuJoCo with its continuous-control defaults,
against SB3's PPO with `VecNormalize` and the same settings, whole processes,
interleaved (HalfCheetah seed 0: pararl, SB3; seed 1: ...).

Each run trains for the whole budget and evaluates the deterministic policy every
`--eval-every` env steps (`--eval-episodes` episodes, true rewards, the training
statistics frozen); its final return is the mean of its last `--final-evals`
evaluations. Wall time is launch to exit. CleanRL's, rl-zoo's and Tianshou's
published 1M-step figures stand beside (not re-measured).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks.lib import harness as h
from benchmarks.lib import sb3, training
from benchmarks.lib.figures import Panel, Series
from benchmarks.lib.training import Run

System = Literal["pararl", "sb3"]
LABELS = {"pararl": "pararl PPO", "sb3": "SB3 PPO + VecNormalize"}

# Published 1M-step results (their own docs). CleanRL ppo_continuous_action: v4, mean
# of the last 100 training episodes over 3 seeds; rl-zoo: v3, tuned per env, one run;
# Tianshou: v3, 64 envs, best evaluation during training.
PUBLISHED: dict[str, dict[str, str]] = {
    "HalfCheetah": {"CleanRL": "1443 ± 46", "rl-zoo": "5819", "Tianshou": "5784 ± 1244"},
    "Hopper": {"CleanRL": "2383 ± 272", "rl-zoo": "2410", "Tianshou": "2609 ± 701"},
    "Walker2d": {"CleanRL": "2288 ± 572", "rl-zoo": "3479", "Tianshou": "3589 ± 757"},
}
CLEANRL = {"HalfCheetah": 1443.0, "Hopper": 2383.0, "Walker2d": 2288.0}


@dataclass(frozen=True)
class Config(h.Options):
    runs: tuple[str, ...] = (
        *(f"HalfCheetah-v5:{seed}" for seed in range(6)),
        "Hopper-v5:0",
        "Walker2d-v5:0",
    )
    """ENV:SEED pairs, run in this order, each by every system."""
    systems: tuple[System, ...] = ("pararl", "sb3")
    """Systems to run."""
    sb3_envs: tuple[str, ...] = ("HalfCheetah-v5",)
    """Envs SB3 runs on (the claim against SB3 is HalfCheetah's; the other envs are held
    against the published figures, and an SB3 run costs about twice pararl's)."""
    budget: int = 1_000_000
    """Env steps per run."""
    eval_every: int = 20_000
    """Env steps between deterministic evaluations."""
    eval_episodes: int = 10
    """Episodes per evaluation."""
    final_evals: int = 3
    """The final return is the mean of this many last evaluations."""
    run_timeout_s: float = 7_200.0
    """A run is killed after this long (and reported as failed)."""


QUICK = dict(
    runs=("HalfCheetah-v5:0",), budget=8_192, eval_every=4_096, eval_episodes=1, final_evals=1
)


def resolve(config: Config) -> Config:
    config = h.apply_quick(config, QUICK)
    h.require(config, ">= 1: budget eval_every eval_episodes final_evals", "> 0: run_timeout_s")
    h.check([(not config.systems, "--systems needs at least one value")])
    for run in config.runs:
        env, _, seed = run.rpartition(":")
        h.check([(not env or not seed.isdigit(), f"--runs: '{run}' is not ENV:SEED")])
    return config


def pararl_command(env: str, seed: int, c: Config, run_dir: Path) -> list[str]:
    return training.train_command(
        "ppo", env=env, seed=seed, total_steps=c.budget, eval_every=c.eval_every,
        eval_episodes=c.eval_episodes,
        target_return=1e12,  # the whole budget, whatever the env's threshold
        run_dir=run_dir, progress="plain", tensorboard=False,
    )  # fmt: skip


def run_one(system: str, env: str, seed: int, c: Config, workdir: Path) -> Run:
    if system == "sb3":
        every = {"eval_every": c.eval_every, "eval_episodes": c.eval_episodes}
        cmd = sb3.command("ppo", "curve", env=env, seed=seed, budget=c.budget, **every)
        return sb3.curve_run(system, env, seed, "ppo", cmd, c.run_timeout_s, workdir)[0]
    cmd = pararl_command(env, seed, c, Run.directory(system, env, seed, workdir))
    return Run.of(system, env, seed, cmd, c.run_timeout_s, workdir)[0]


@dataclass
class Result:
    config: Config
    runs: list[Run]


def measure(c: Config, meta: h.Metadata) -> Result:
    del meta
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="pararl-bench-mujoco-") as tmp:
        for spec in c.runs:
            env, _, seed = spec.rpartition(":")
            for system in c.systems:
                if system == "sb3" and env not in c.sb3_envs:
                    continue
                h.progress(f"mujoco: {system} {env} seed {seed} ...")
                run = run_one(system, env, int(seed), c, Path(tmp))
                runs.append(run)
                final = run.final(c.final_evals)
                shown = "failed" if final is None else f"final {final:.0f}"
                h.progress(f"mujoco: {system} {env} seed {seed}: {shown}, {run.wall_s:.0f} s")
    return Result(c, runs)


def family(env: str) -> str:
    return env.split("/")[-1].split("-")[0]


def report(result: Result, meta: h.Metadata) -> h.Report:
    del meta
    c, runs = result.config, result.runs
    envs = list(dict.fromkeys(r.env for r in runs))

    def best(r: Run) -> float | None:
        return max((p["eval_return"] for p in r.curve), default=None)

    def per_s(count: int, r: Run) -> str:
        return h.fmt_rate(count / r.wall_s if r.wall_s else None)

    cols: list[h.Col[Run]] = [
        h.Col("env", lambda r: r.env, "l"),
        h.Col("system", lambda r: LABELS.get(r.system, r.system), "l"),
        h.Col("seed", lambda r: r.seed),
        h.Col(
            f"final (last {c.final_evals} evals)", lambda r: h.fmt_num(r.final(c.final_evals), 0)
        ),
        h.Col("best eval", lambda r: h.fmt_num(best(r), 0)),
        h.Col("wall (s)", lambda r: h.fmt_num(r.wall_s, 0)),
        h.Col("env steps/s", lambda r: per_s(r.env_steps, r)),
        h.Col("updates/s", lambda r: per_s(r.updates, r)),
        h.Col("note", lambda r: r.note[-80:], "l"),
    ]
    published = [
        [f"{f} (v4 CleanRL, v3 others)", *PUBLISHED[f].values()]
        for f in dict.fromkeys(family(e) for e in envs)
        if f in PUBLISHED
    ]
    heads = ("env", "CleanRL (3 seeds)", "rl-zoo (tuned)", "Tianshou (64 envs)")
    pub_table = h.text_table(heads, published)
    notes = (
        f"Budget {c.budget:,} env steps per run; deterministic evaluation every "
        f"{c.eval_every:,} steps, {c.eval_episodes} episodes. Both systems: 8 envs x 256 "
        "steps per rollout, 10 epochs of 64-sample minibatches, lr 3e-4 annealed, gamma "
        "0.99, lambda 0.95, clip 0.2 (no value clipping), observations and rewards normalised, "
        "clipped at 10. pararl: its defaults for continuous actions, nothing set; SB3: "
        f"`VecNormalize` over {sb3.MUJOCO_ENVS} `DummyVecEnv` envs. Runs in the order run."
    )
    blocks = [notes + "\n\n" + h.table(cols, runs)]
    if published:
        blocks.append("Published 1M-step figures (their docs; not re-measured):\n\n" + pub_table)
    panels = []
    for env in envs:
        for axis, label in (("env_steps", "env steps"), ("wall_s", "wall time (s)")):
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
            hlines: list[tuple[float, str, str | None]] = (
                [(CLEANRL[family(env)], ":", "CleanRL 1M (v4)")] if family(env) in CLEANRL else []
            )
            title = f"{env}: return vs {label}"
            panels.append(Panel(title, series, label, "eval return", hlines=hlines))
    return h.Report(
        "PPO on MuJoCo against SB3 (`python -m benchmarks mujoco`)",
        ratios(runs, c),
        blocks,
        panels,
        figure_alt="MuJoCo PPO benchmark",
    )


def ratios(runs: list[Run], c: Config) -> str:
    parts = []
    for env in dict.fromkeys(r.env for r in runs):
        mine = {s: [r for r in runs if r.env == env and r.system == s and r.ok] for s in c.systems}
        final = {s: [r.final(c.final_evals) for r in rs] for s, rs in mine.items()}
        med = {s: h.med(h.maybe([x for x in v if x is not None])) for s, v in final.items()}
        wall = {
            s: statistics.median(r.wall_s for r in rs) if rs else None for s, rs in mine.items()
        }
        text = f"{env}: pararl final {h.fmt_num(med.get('pararl'), 0)}"
        if mine.get("sb3"):
            text += f" vs SB3 {h.fmt_num(med['sb3'], 0)}"
            text += f", wall ÷ SB3 {h.fmt_ratio(h.ratio(wall.get('pararl'), wall['sb3']))}"
        if family(env) in CLEANRL:
            text += f" (CleanRL published {CLEANRL[family(env)]:.0f})"
        parts.append(text + f", median of {len(mine.get('pararl', []))} seed(s)")
    return "; ".join(parts)
