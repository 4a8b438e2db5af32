"""`python -m benchmarks minatar_ab`: pararl's PPO against SB3's on a MinAtar game,
with every final policy evaluated the same way, greedy and sampled.

Why: `benchmarks pixels` found pararl's PPO below SB3's on Space Invaders at 300k
steps (9.9 against 15.2; SB3's EvalCallback and pararl's evaluation child both act
greedily, 10 episodes, the mean of the last two evaluations). Here each run trains
for the whole budget with no evaluation, then its final policy plays the same
episodes (same seeds, sticky actions as in training) twice: taking the most likely
action (greedy) and sampling its actions (the policy as it was trained). Also: the
mean return of the run's last 20 training episodes, and the policy's mean entropy
over the states of its sampled episodes.

Variants, one difference at a time: `defaults` (pararl's MinAtar settings; the one
difference in the loss is value clipping: SB3 clips the value and keeps the clipped
error alone, pararl keeps the larger of the clipped and unclipped errors, as CleanRL),
and `no-value-clip` (both unclipped: the same loss; `tests/algos/test_ppo_against_sb3.py`
shows that, from the same weights and random draws, the two give the same rollouts
and the same update).

Each run is its own process:

    python -m benchmarks.minatar_ab pararl --env MinAtar/SpaceInvaders-v1 --seed 0
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchmarks.lib import harness as h
from benchmarks.lib.figures import Panel, Series

System = Literal["pararl", "sb3"]
Variant = Literal["defaults", "no-value-clip"]
SYSTEMS: tuple[System, ...] = ("pararl", "sb3")
PREFIX = "minatar-ab: "
EPISODE_CAP = 27_000  # steps of one evaluation episode at most (a policy may never die)
METRICS = ("train", "greedy", "sampled", "entropy")


@dataclass(frozen=True)
class Config(h.Options):
    """pararl PPO vs SB3 PPO on a MinAtar game, final policies evaluated greedy and
    sampled on the same episodes. --quick: Breakout, 1 seed, 8,192 steps."""

    env: str = "MinAtar/SpaceInvaders-v1"
    """MinAtar game."""
    seeds: int = 5
    """Seeds per system and variant (first_seed, first_seed + 1, ...)."""
    first_seed: int = 0
    """The first seed (more seeds can be run later beside the first ones)."""
    budget: int = 300_000
    """Env steps per run."""
    variants: tuple[Variant, ...] = ("defaults", "no-value-clip")
    """Variants (see the module doc)."""
    episodes: int = 50
    """Evaluation episodes per final policy, greedy and again sampled."""
    run_timeout_s: float = 1800.0
    """One run is killed after this long (reported as failed)."""


QUICK = {"env": "MinAtar/Breakout-v1", "seeds": 1, "budget": 8_192, "episodes": 3}


def resolve(config: Config) -> Config:
    c = h.apply_quick(config, QUICK)
    h.require(c, ">= 1: seeds budget episodes", "> 0: run_timeout_s", ">= 0: first_seed")
    h.check([(not c.variants, "--variants needs at least one value")])
    return c


# --- one run (its own process) ------------------------------------------------------


Act = Callable[[np.ndarray, bool], np.ndarray]  # (obs batch, deterministic) -> actions
Probs = Callable[[np.ndarray], np.ndarray]  # obs batch -> action probabilities


def evaluate(
    act: Act, probs: Probs, env_id: str, episodes: int, seed: int, greedy: bool
) -> dict[str, Any]:
    """Returns (and, sampled, the policy's mean entropy) of `episodes` episodes whose
    reset seeds come from `seed`: the same episodes for every policy given it."""
    from pararl.envs.make import env_factory

    env = env_factory(env_id, training=False)()
    seeds = np.random.SeedSequence(seed).generate_state(episodes)
    returns, lengths, entropies = [], [], []
    try:
        for ep_seed in seeds:
            obs, _ = env.reset(seed=int(ep_seed))
            total, steps, done = 0.0, 0, False
            while not done and steps < EPISODE_CAP:
                if not greedy:
                    p = probs(obs[None])[0]
                    entropies.append(float(-(p * np.log(np.maximum(p, 1e-12))).sum()))
                obs, reward, terminated, truncated, _ = env.step(int(act(obs[None], greedy)[0]))
                total, steps, done = total + float(reward), steps + 1, terminated or truncated
            returns.append(total)
            lengths.append(steps)
    finally:
        env.close()
    out = {"mean": float(np.mean(returns)), "returns": returns, "length": float(np.mean(lengths))}
    if entropies:
        out["entropy"] = float(np.mean(entropies))
    return out


def train_pararl(env: str, seed: int, budget: int, variant: str, workdir: Path) -> Any:
    """pararl's PPO with its MinAtar defaults (8 envs: 2 workers x 4), no evaluations;
    returns (act, probs, mean of the last 20 training episodes)."""
    import torch

    from pararl import PPOConfig, checkpoint, train
    from pararl.algos.ppo import load_policy
    from pararl.config import config_from_json

    extra = {"clip_vloss": False} if variant == "no-value-clip" else {}
    never = 10**12
    cfg = PPOConfig(
        env=env, seed=seed, total_steps=budget, run_dir=workdir / "run", workers=2,
        envs_per_worker=4, eval_every=never, checkpoint_every=never, tensorboard=False,
        progress="none", **extra,  # type: ignore[arg-type]
    )  # fmt: skip
    session = train(cfg)
    assert session is not None
    config = config_from_json(session.run.config.read_text())
    model = load_policy(config, checkpoint.load(session.run.checkpoint("final")))  # type: ignore[arg-type]
    with (session.run.root / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("episode_return")]
    last20 = float(rows[-1]["episode_return"])  # the session's mean of its last 20

    @torch.no_grad()
    def act(obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return model.act_tensors(torch.as_tensor(obs), deterministic=deterministic)[0].numpy()

    @torch.no_grad()
    def probs(obs: np.ndarray) -> np.ndarray:
        features = model._features(torch.as_tensor(obs))
        return torch.softmax(model.actor(features), -1).numpy()

    return act, probs, last20


def train_sb3(env: str, seed: int, budget: int, variant: str) -> Any:
    """SB3's PPO with the same settings (`benchmarks.lib.sb3.minatar_ppo`), 8 envs."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from benchmarks.lib.sb3 import PPO_ENVS, minatar_ppo, silent
    from pararl.envs.make import env_factory

    hyper = minatar_ppo()
    if variant == "no-value-clip":
        hyper["clip_range_vf"] = None
    envs = make_vec_env(env_factory(env, training=True), n_envs=PPO_ENVS, seed=seed)
    model = PPO("MlpPolicy", envs, seed=seed, device="cpu", verbose=0, **hyper)
    silent(model).learn(total_timesteps=budget)
    assert model.ep_info_buffer is not None
    last20 = float(np.mean([e["r"] for e in list(model.ep_info_buffer)[-20:]]))

    def act(obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return np.asarray(model.predict(obs, deterministic=deterministic)[0])

    @torch.no_grad()
    def probs(obs: np.ndarray) -> np.ndarray:
        dist = model.policy.get_distribution(model.policy.obs_to_tensor(obs)[0])
        return dist.distribution.probs.numpy()  # type: ignore[union-attr]

    return act, probs, last20


def run_main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.minatar_ab", description=__doc__)
    p.add_argument("system", choices=SYSTEMS)
    p.add_argument("--env", default="MinAtar/SpaceInvaders-v1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=int, default=300_000)
    p.add_argument("--variant", choices=("defaults", "no-value-clip"), default="defaults")
    p.add_argument("--episodes", type=int, default=50)
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if a.system == "pararl":
            act, probs, train_return = train_pararl(a.env, a.seed, a.budget, a.variant, Path(tmp))
        else:
            act, probs, train_return = train_sb3(a.env, a.seed, a.budget, a.variant)
        train_s = time.perf_counter() - start
        eval_seed = 10_000 + a.seed  # the same episodes for both systems
        greedy = evaluate(act, probs, a.env, a.episodes, eval_seed, greedy=True)
        sampled = evaluate(act, probs, a.env, a.episodes, eval_seed, greedy=False)
    result = {"train": train_return, "greedy": greedy, "sampled": sampled, "train_s": train_s}
    print(PREFIX + json.dumps(result), flush=True)
    return 0


# --- the benchmark ------------------------------------------------------------------


@dataclass
class Run:
    system: str
    variant: str
    seed: int
    ok: bool
    wall_s: float
    train: float | None = None
    greedy: float | None = None
    sampled: float | None = None
    entropy: float | None = None
    greedy_length: float | None = None
    sampled_length: float | None = None
    note: str = ""


@dataclass
class Cell:
    system: str
    variant: str
    runs: int
    stats: dict[str, h.Summary | None] = field(default_factory=dict)


@dataclass
class Results:
    env: str
    budget: int
    episodes: int
    cells: list[Cell]
    runs: list[Run]


def one_run(system: str, variant: str, seed: int, c: Config, workdir: Path) -> Run:
    from benchmarks.lib.training import run_process

    cmd = [sys.executable, "-m", "benchmarks.minatar_ab", system, "--env", c.env]
    cmd += ["--seed", str(seed), "--budget", str(c.budget), "--variant", variant]
    done = run_process([*cmd, "--episodes", str(c.episodes)], c.run_timeout_s, workdir)
    line = next((x for x in reversed(done.stdout.splitlines()) if x.startswith(PREFIX)), None)
    run = Run(system, variant, seed, done.returncode == 0 and line is not None, done.wall_s)
    if line is None:
        run.note = (done.stderr.strip().splitlines() or ["no result"])[-1][:120]
        return run
    r = json.loads(line[len(PREFIX) :])
    run.train, run.greedy, run.sampled = r["train"], r["greedy"]["mean"], r["sampled"]["mean"]
    run.entropy = r["sampled"].get("entropy")
    run.greedy_length, run.sampled_length = r["greedy"]["length"], r["sampled"]["length"]
    return run


def measure(c: Config, meta: h.Metadata) -> Results:
    del meta
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        # interleaved: seed by seed, every variant and system
        for seed in range(c.first_seed, c.first_seed + c.seeds):
            for variant in c.variants:
                for system in SYSTEMS:
                    h.progress(f"minatar_ab: {system} {variant} seed {seed}")
                    runs.append(one_run(system, variant, seed, c, Path(tmp)))
    cells = []
    for variant in c.variants:
        for system in SYSTEMS:
            mine = [r for r in runs if r.system == system and r.variant == variant and r.ok]
            stats = {m: h.maybe([getattr(r, m) for r in mine if getattr(r, m) is not None])
                     for m in METRICS}  # fmt: skip
            cells.append(Cell(system, variant, len(mine), stats))
    return Results(c.env, c.budget, c.episodes, cells, runs)


def report(r: Results, meta: h.Metadata) -> h.Report:
    del meta
    label = {"pararl": "pararl PPO", "sb3": "SB3 PPO"}
    game = r.env.split("/")[-1]

    def spread(m: str) -> Callable[[Cell], str]:
        return lambda cell: h.fmt_spread(cell.stats.get(m), lambda v: f"{v:.1f}")

    cols = [
        h.Col[Cell]("variant", lambda x: x.variant, "l"),
        h.Col[Cell]("system", lambda x: label[x.system], "l"),
        h.Col[Cell]("runs", lambda x: x.runs),
        h.Col[Cell]("last 20 training episodes", spread("train")),
        h.Col[Cell]("greedy evaluation", spread("greedy")),
        h.Col[Cell]("sampled evaluation", spread("sampled")),
        h.Col[Cell]("policy entropy (nats)", lambda x: h.fmt_spread(x.stats.get("entropy"),
                                                                     lambda v: f"{v:.2f}")),
    ]  # fmt: skip
    run_cols = [
        h.Col[Run]("variant", lambda x: x.variant, "l"),
        h.Col[Run]("system", lambda x: label[x.system], "l"),
        h.Col[Run]("seed", lambda x: x.seed),
        h.Col[Run]("training", lambda x: h.fmt_num(x.train)),
        h.Col[Run]("greedy", lambda x: h.fmt_num(x.greedy)),
        h.Col[Run]("sampled", lambda x: h.fmt_num(x.sampled)),
        h.Col[Run]("greedy ÷ sampled", lambda x: h.fmt_ratio(h.ratio(x.greedy, x.sampled))),
        h.Col[Run]("episode length greedy / sampled", lambda x: (
            f"{h.fmt_num(x.greedy_length, 0)} / {h.fmt_num(x.sampled_length, 0)}")),
        h.Col[Run]("entropy", lambda x: h.fmt_num(x.entropy, 2)),
        h.Col[Run]("wall s", lambda x: h.fmt_num(x.wall_s, 0)),
        h.Col[Run]("note", lambda x: x.note, "l"),
    ]  # fmt: skip
    intro = (
        f"{game}, {r.budget:,} env steps per run, 8 envs, each system's MinAtar PPO "
        "settings (the same numbers; `benchmarks.lib.sb3.minatar_ppo`); no evaluation during "
        f"training. Each final policy then plays the same {r.episodes} episodes twice "
        "(sticky actions 0.1, as in training): greedy (the most likely action) and "
        "sampled. Training: the mean return of the run's last 20 training episodes. "
        "Entropy: the policy's mean over the states of its sampled episodes (uniform "
        "over the game's actions would be ln(actions)). Medians over seeds (min–max)."
    )
    keys = []
    for variant in dict.fromkeys(c.variant for c in r.cells):
        cells = {c.system: c for c in r.cells if c.variant == variant}
        parts = []
        for m in ("train", "greedy", "sampled"):
            a, b = (cells[s].stats.get(m) if s in cells else None for s in SYSTEMS)
            parts.append(f"{m} {h.fmt_num(h.med(a))} vs {h.fmt_num(h.med(b))}")
        keys.append(f"{variant}: pararl vs SB3 medians " + ", ".join(parts))
    panels = []
    for m, title in (("train", "training"), ("greedy", "greedy evaluation"),
                     ("sampled", "sampled evaluation")):  # fmt: skip
        series = []
        for i, (system, variant) in enumerate(
            (s, v) for v in dict.fromkeys(c.variant for c in r.cells) for s in SYSTEMS
        ):
            mine = [x for x in r.runs if x.system == system and x.variant == variant]
            ys = [getattr(x, m) for x in mine if getattr(x, m) is not None]
            series.append(Series(f"{label[system]}, {variant}", [i] * len(ys), ys,
                                 kind="points", fmt="o", color=f"C{i}"))  # fmt: skip
        panels.append(Panel(f"{game}: {title}", series, ylabel="return", legend=m == "train"))
    return h.Report(
        title="PPO on MinAtar against SB3, final policies evaluated alike "
        "(`python -m benchmarks minatar_ab`)",
        key_ratios="; ".join(keys),
        blocks=[
            intro,
            h.table(cols, r.cells),
            "Runs, in the order run:",
            h.table(run_cols, r.runs),
        ],
        panels=panels,
        figure_alt="final returns per seed: training, greedy and sampled evaluation",
        legend_below=True,
    )


__all__ = ["Config", "measure", "report", "resolve", "run_main"]

if __name__ == "__main__":
    sys.exit(run_main())
