"""The actor-critic network's initialisation."""

from __future__ import annotations

import math

import torch

from pararl.models import ActorCritic


def test_actor_critic_starts_near_uniform_with_orthogonal_layers() -> None:
    torch.manual_seed(0)
    model = ActorCritic(4, 3, True, (64, 64))
    probs = model.distribution(model._features(torch.randn(256, 4))).probs
    assert torch.allclose(probs, torch.full_like(probs, 1 / 3), atol=0.02)
    hidden = model.actor[2].weight  # 64x64, orthogonal with gain sqrt(2)
    torch.testing.assert_close(hidden @ hidden.T, 2 * torch.eye(64), atol=1e-5, rtol=0)
    assert model.critic[0].bias.abs().sum() == 0
    plain = ActorCritic(4, 3, True, (64, 64), orthogonal_init=False)
    norms = (
        float(plain.actor[-1].weight.detach().norm()),
        float(model.actor[-1].weight.detach().norm()),
    )
    assert not math.isclose(*norms)


def test_clip_annealing_narrows_the_surrogate() -> None:
    import numpy as np

    from pararl.algos.ppo import PPOHyper, PPOLearner

    torch.manual_seed(0)
    learner = PPOLearner(
        ActorCritic(4, 2, True, (8,)), PPOHyper(clip_coef=0.2), 1e-3, torch.device("cpu")
    )
    learner.set_clip_fraction(0.25)
    assert math.isclose(learner.clip, 0.05)
    n = 64
    batch = {
        "obs": np.random.default_rng(0).normal(size=(n, 4)).astype(np.float32),
        "actions": np.zeros(n, dtype=np.int64),
        "logprobs": np.full(n, -0.5, np.float32),  # ratio exp(-0.69 + 0.5) ~ 0.83: clipped
        "advantages": np.ones(n, np.float32),
        "returns": np.zeros(n, np.float32),
        "values": np.zeros(n, np.float32),
    }
    stats = learner.update(batch, np.random.default_rng(0))
    assert stats["clipfrac"] > 0.9  # |ratio - 1| > 0.05 for nearly every sample
