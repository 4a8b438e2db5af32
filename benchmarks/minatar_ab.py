"""`python -m benchmarks minatar_ab`: pararl's PPO against SB3's on a MinAtar game,
each final policy evaluated alike, greedy and sampled, to see why `pixels` found
pararl below SB3 on Space Invaders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.lib import compare
from benchmarks.lib import harness as h
from benchmarks.lib.compare import NEVER, Comparison, Outcome, Run, System
from benchmarks.lib.figures import Panel, Series

EPISODE_CAP = 27_000  # steps of one evaluation episode at most (a policy may never die)
METRICS = ("train", "greedy", "sampled", "entropy")
ROW = Comparison(
    name="minatar_ab",
    title="PPO on MinAtar against SB3, final policies evaluated alike",
    systems=(
        # 8 envs, as SB3's
        System("pararl", "pararl PPO", "ppo", {"workers": 2, "envs_per_worker": 4}),
        System("sb3", "SB3 PPO", "ppo", anchor="minatar"),
    ),
    runs=tuple(f"MinAtar/SpaceInvaders-v1:{seed}" for seed in range(5)),
    budget=300_000,
    eval_every=NEVER,  # no evaluation during training
    final_evals=1,
    run_timeout_s=1800.0,
    quick=dict(runs=("MinAtar/Breakout-v1:0",), budget=8_192),
)  # fmt: skip


@dataclass(frozen=True)
class Config(compare.Options, h.Options):
    """pararl PPO vs SB3 PPO on a MinAtar game, final policies evaluated greedy and
    sampled on the same episodes. --quick: Breakout, 1 seed, 8,192 steps."""

    episodes: int = 50
    """Evaluation episodes per final policy, greedy and again sampled."""


def resolve(config: Config) -> Config:
    c = h.apply_quick(compare.resolve(ROW, config), {"episodes": 3})
    h.require(c, ">= 1: episodes")
    return c


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


def pararl_policy(run_dir: Path) -> tuple[Act, Probs]:
    """A pararl run's final policy: its actions and its action probabilities."""
    import torch

    import pararl
    from pararl.models import ActorCritic

    agent = pararl.load(run_dir, "final")
    net = agent.network
    assert isinstance(net, ActorCritic)

    @torch.no_grad()
    def probs(obs: np.ndarray) -> np.ndarray:
        dist = net.distribution(net._features(torch.as_tensor(obs)))
        return dist.probs.numpy()

    return lambda obs, greedy: np.asarray(agent.act(obs, deterministic=greedy)), probs


def sb3_policy(run_dir: Path) -> tuple[Act, Probs]:
    """An SB3 run's saved model: its actions and its action probabilities."""
    import torch
    from stable_baselines3 import PPO

    model = PPO.load(run_dir / "model.zip", device="cpu")

    @torch.no_grad()
    def probs(obs: np.ndarray) -> np.ndarray:
        dist = model.policy.get_distribution(model.policy.obs_to_tensor(obs)[0])
        return dist.distribution.probs.numpy()  # type: ignore[union-attr]

    return lambda obs, greedy: np.asarray(model.predict(obs, deterministic=greedy)[0]), probs


def final_policy(episodes: int) -> compare.After:
    """After each run: its final policy plays the same `episodes` episodes greedy, then
    sampled (the seeds of its ENV:SEED)."""

    def after(s: System, run: Run, run_dir: Path) -> None:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            act, probs = (sb3_policy if s.anchor else pararl_policy)(run_dir)
            eval_seed = 10_000 + run.seed  # the same episodes for both systems
            greedy = evaluate(act, probs, run.env, episodes, eval_seed, greedy=True)
            sampled = evaluate(act, probs, run.env, episodes, eval_seed, greedy=False)
        finally:
            torch.set_num_threads(threads)
        run.extra = {
            "train": run.train_return,
            "greedy": greedy["mean"],
            "sampled": sampled["mean"],
            "entropy": sampled.get("entropy"),
            "greedy_length": greedy["length"],
            "sampled_length": sampled["length"],
        }

    return after


@dataclass
class Cell:
    system: str
    runs: int
    stats: dict[str, h.Summary | None] = field(default_factory=dict)


@dataclass
class Results:
    outcome: Outcome
    cells: list[Cell]


def measure(c: Config, meta: h.Metadata) -> Results:
    outcome = compare.measure(ROW, c, meta, after=final_policy(c.episodes))
    cells = []
    for system in c.systems:
        mine = [r.extra for r in outcome.runs if r.system == system and r.ok and r.extra]
        stats = {m: h.maybe([x[m] for x in mine if x.get(m) is not None]) for m in METRICS}
        cells.append(Cell(system, len(mine), stats))
    return Results(outcome, cells)


def report(r: Results, meta: h.Metadata) -> h.Report:
    p, label = meta.params, {s.name: s.label for s in ROW.systems}
    games = ", ".join(dict.fromkeys(run.env.split("/")[-1] for run in r.outcome.runs))

    def spread(m: str, digits: int = 1) -> Callable[[Cell], str]:
        return lambda cell: h.fmt_spread(cell.stats.get(m), lambda v: f"{v:.{digits}f}")

    def get(m: str, digits: int = 1) -> Callable[[Run], str]:
        return lambda run: h.fmt_num(run.extra.get(m), digits)

    cols = [
        h.Col[Cell]("system", lambda x: label[x.system], "l"),
        h.Col[Cell]("runs", lambda x: x.runs),
        h.Col[Cell]("last 20 training episodes", spread("train")),
        h.Col[Cell]("greedy evaluation", spread("greedy")),
        h.Col[Cell]("sampled evaluation", spread("sampled")),
        h.Col[Cell]("policy entropy (nats)", spread("entropy", 2)),
    ]
    run_cols = [
        h.Col[Run]("system", lambda x: label[x.system], "l"),
        h.Col[Run]("env", lambda x: x.env, "l"),
        h.Col[Run]("seed", lambda x: x.seed),
        h.Col[Run]("training", get("train")),
        h.Col[Run]("greedy", get("greedy")),
        h.Col[Run]("sampled", get("sampled")),
        h.Col[Run]("greedy ÷ sampled", lambda x: h.fmt_ratio(
            h.ratio(x.extra.get("greedy"), x.extra.get("sampled")))),
        h.Col[Run]("episode length greedy / sampled", lambda x: (
            f"{get('greedy_length', 0)(x)} / {get('sampled_length', 0)(x)}")),
        h.Col[Run]("entropy", get("entropy", 2)),
        h.Col[Run]("wall s", lambda x: h.fmt_num(x.wall_s, 0)),
        h.Col[Run]("note", lambda x: x.note, "l"),
    ]  # fmt: skip
    intro = (
        f"{games}, {p['budget']:,} env steps per run, 8 envs, each system's MinAtar PPO "
        "settings (the same numbers; `benchmarks.lib.sb3.minatar_ppo`); no evaluation during "
        f"training. Each final policy then plays the same {p['episodes']} episodes twice "
        "(sticky actions 0.1, as in training): greedy (the most likely action) and "
        "sampled. Training: the mean return of the run's last 20 training episodes. "
        "Entropy: the policy's mean over the states of its sampled episodes (uniform "
        "over the game's actions would be ln(actions)). Medians over seeds (min–max)."
    )
    cells, parts = {c.system: c for c in r.cells}, []
    for m in ("train", "greedy", "sampled"):
        a, b = (h.med(cells[x].stats.get(m)) if x in cells else None for x in ("pararl", "sb3"))
        parts.append(f"{m} {h.fmt_num(a)} vs {h.fmt_num(b)}")
    panels = []
    for m, title in (("train", "training"), ("greedy", "greedy evaluation"),
                     ("sampled", "sampled evaluation")):  # fmt: skip
        series = []
        for i, cell in enumerate(r.cells):
            ys = [x.extra[m] for x in r.outcome.runs if x.system == cell.system
                  and x.extra.get(m) is not None]  # fmt: skip
            series.append(Series(label[cell.system], [i] * len(ys), ys, kind="points", fmt="o",
                                 color=f"C{i}"))  # fmt: skip
        panels.append(Panel(f"{games}: {title}", series, ylabel="return", legend=m == "train"))
    return h.Report(
        title=f"PPO on MinAtar against SB3, final policies evaluated alike (`{h.PROG} minatar_ab`)",
        key_ratios="pararl vs SB3 medians " + ", ".join(parts),
        blocks=[
            intro,
            h.table(cols, r.cells),
            "Runs, in the order run:",
            h.table(run_cols, r.outcome.runs),
        ],
        panels=panels,
        figure_alt="final returns per seed: training, greedy and sampled evaluation",
        legend_below=True,
    )


__all__ = ["Config", "evaluate", "measure", "report", "resolve"]
