"""A finished run's final policy played again, alike for pararl and SB3: the same
episodes greedy, then sampled (with the policy's entropy), as `after` hooks of
`lib.compare.measure` (the `minatar_ab` row)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.lib.compare import After, Run, System

EPISODE_CAP = 27_000  # steps of one evaluation episode at most (a policy may never die)
# what `after` adds to each run, with its words in the report
METRICS = {"train": "last 20 training episodes", "greedy": "greedy evaluation",
           "sampled": "sampled evaluation", "entropy": "policy entropy (nats)"}  # fmt: skip

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
    out = {"mean": float(np.mean(returns)), "length": float(np.mean(lengths))}
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


def played(c: Any) -> After:
    """After each run: its final policy plays the same `c.episodes` episodes greedy, then
    sampled (the seeds of its ENV:SEED), on one torch thread."""

    def after(s: System, run: Run, run_dir: Path) -> None:
        from pararl.intraop import torch_threads

        with torch_threads(1):
            act, probs = (sb3_policy if s.anchor else pararl_policy)(run_dir)
            eval_seed = 10_000 + run.seed  # the same episodes for both systems
            greedy = evaluate(act, probs, run.env, c.episodes, eval_seed, greedy=True)
            sampled = evaluate(act, probs, run.env, c.episodes, eval_seed, greedy=False)
        run.extra = {"train": run.train_return, "greedy": greedy["mean"],
                     "sampled": sampled["mean"], "entropy": sampled.get("entropy"),
                     "greedy_length": greedy["length"],
                     "sampled_length": sampled["length"]}  # fmt: skip

    return after
