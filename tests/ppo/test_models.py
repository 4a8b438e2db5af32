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
