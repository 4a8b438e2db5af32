"""`python -m benchmarks minatar_ab`: pararl's PPO against SB3's on a MinAtar game,
each final policy evaluated alike, greedy and sampled, to see why `pixels` found
pararl below SB3 on Space Invaders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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

    episodes: int = 50  # Evaluation episodes per final policy, greedy and again sampled.


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
        run.extra = {"train": run.train_return, "greedy": greedy["mean"],
                     "sampled": sampled["mean"], "entropy": sampled.get("entropy"),
                     "greedy_length": greedy["length"],
                     "sampled_length": sampled["length"]}  # fmt: skip

    return after


@dataclass
class Results:
    outcome: Outcome
    cells: dict[str, dict[str, h.Summary | None]]  # system: METRICS' summaries over seeds


def measure(c: Config, meta: h.Metadata) -> Results:
    outcome = compare.measure(ROW, c, meta, after=final_policy(c.episodes))
    extras = {s: [r.extra for r in outcome.runs if r.system == s and r.ok and r.extra]
              for s in c.systems}  # fmt: skip
    return Results(outcome, {s: {m: h.maybe([x[m] for x in mine if x.get(m) is not None])
                                 for m in METRICS} for s, mine in extras.items()})  # fmt: skip


def report(r: Results, meta: h.Metadata) -> h.Report:
    p, label = meta.params, {s.name: s.label for s in ROW.systems}
    games = ", ".join(dict.fromkeys(run.env.split("/")[-1] for run in r.outcome.runs))

    def spread(m: str, digits: int = 1) -> Callable[[str], str]:
        return lambda s: h.fmt_spread(r.cells[s].get(m), lambda v: f"{v:.{digits}f}")

    def get(m: str, digits: int = 1) -> Callable[[Run], str]:
        return lambda run: h.fmt_num(run.extra.get(m), digits)

    cols = [
        h.Col[str]("system", label.__getitem__, "l"),
        h.Col[str]("runs", lambda s: len([x for x in r.outcome.runs if x.system == s and x.extra])),
        h.Col[str]("last 20 training episodes", spread("train")),
        h.Col[str]("greedy evaluation", spread("greedy")),
        h.Col[str]("sampled evaluation", spread("sampled")),
        h.Col[str]("policy entropy (nats)", spread("entropy", 2)),
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
    parts = [f"{m} " + " vs ".join(h.fmt_num(h.med(r.cells[s].get(m)) if s in r.cells else None)
                                   for s in ("pararl", "sb3")) for m in METRICS[:3]]  # fmt: skip
    panels = []
    for m, title in zip(METRICS[:3], ("training", "greedy evaluation", "sampled evaluation"),
                        strict=True):  # fmt: skip
        series = []
        for i, system in enumerate(r.cells):
            ys = [x.extra[m] for x in r.outcome.runs if x.system == system
                  and x.extra.get(m) is not None]  # fmt: skip
            series.append(Series(label[system], [i] * len(ys), ys, kind="points", fmt="o",
                                 color=f"C{i}"))  # fmt: skip
        panels.append(Panel(f"{games}: {title}", series, ylabel="return", legend=m == "train"))
    return h.Report(
        f"PPO on MinAtar against SB3, final policies evaluated alike (`{h.PROG} minatar_ab`)",
        "pararl vs SB3 medians " + ", ".join(parts),
        [intro, h.table(cols, list(r.cells)), "Runs, in the order run:",
         h.table(run_cols, r.outcome.runs)],
        panels, "final returns per seed: training, greedy and sampled evaluation",
        legend_below=True,
    )  # fmt: skip
