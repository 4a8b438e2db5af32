"""A learning guard for images: pararl's PPO on MinAtar Space Invaders, 40,960 steps
with its MinAtar defaults, must end clearly above a random policy and near SB3's PPO
at the same budget. Measured with the same 100-episode sampled evaluation (sticky
actions as in training, `benchmarks.minatar_ab.evaluate`; results/notes-2026.md,
`minatar_ab_guard_40k`, both with the MinAtar entropy bonus of 0.03): a random policy
4.0; SB3's PPO 5.5-6.1 over 5 seeds (median 6.0); pararl's 5.6-6.0 (median 6.0). The
threshold, 5.0, sits between them: ~3 standard errors above random, below every SB3
seed. The run is serial, so it is the same run on every machine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("minatar")

from benchmarks.minatar_ab import evaluate

from pararl import PPOConfig, checkpoint, train
from pararl.algos.ppo import load_policy

ENV, BUDGET, EPISODES, THRESHOLD = "MinAtar/SpaceInvaders-v1", 40_960, 100, 5.0
NEVER = 10**12


@pytest.mark.slow
def test_ppo_learns_space_invaders(tmp_path: Path) -> None:
    cfg = PPOConfig(
        env=ENV, total_steps=BUDGET, seed=0, mode="serial", workers=2, envs_per_worker=4,
        eval_every=NEVER, checkpoint_every=NEVER, tensorboard=False, progress="none",
        run_dir=tmp_path / "run",
        eval_in="inline",  # only the end-of-budget evaluation, after training: no child for it
    )  # fmt: skip
    session = train(cfg)
    assert session is not None
    model = load_policy(session.config, checkpoint.load(session.run.checkpoint("final")))  # type: ignore[arg-type]

    @torch.no_grad()
    def act(obs: np.ndarray, deterministic: bool) -> np.ndarray:
        return model.act_tensors(torch.as_tensor(obs), deterministic=deterministic)[0].numpy()

    @torch.no_grad()
    def probs(obs: np.ndarray) -> np.ndarray:
        return torch.softmax(model.actor(model._features(torch.as_tensor(obs))), -1).numpy()

    result = evaluate(act, probs, ENV, EPISODES, 777, greedy=False)
    assert result["mean"] >= THRESHOLD, result["returns"]
