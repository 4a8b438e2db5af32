"""The actor-critic network: initialisation, log-probabilities and entropies."""

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


def test_discrete_log_probs_and_entropy_match_categorical() -> None:
    torch.manual_seed(0)
    model = ActorCritic(4, 3, True, (16,), orthogonal_init=False)  # far from uniform
    obs = torch.randn(64, 4)
    dist = model.distribution(model._features(obs))
    actions = torch.randint(0, 3, (64,))
    log_prob, entropy, value = model.evaluate(obs, actions)
    torch.testing.assert_close(log_prob, dist.log_prob(actions))
    torch.testing.assert_close(entropy, dist.entropy())
    torch.testing.assert_close(value, model.value(obs))
    sampled, sampled_log_prob, _ = model.act(obs)
    torch.testing.assert_close(sampled_log_prob, dist.log_prob(sampled))
    greedy, _, _ = model.act(obs, deterministic=True)
    assert torch.equal(greedy, dist.probs.argmax(-1))
    assert torch.equal(torch.from_numpy(model.greedy(obs.numpy())), greedy)
    many = model.act(obs[:1].expand(20_000, 4))[0]  # sampling follows the probabilities
    freq = torch.bincount(many, minlength=3) / len(many)
    torch.testing.assert_close(freq, dist.probs[0], atol=0.015, rtol=0)


def test_continuous_log_probs_sum_over_action_dims() -> None:
    torch.manual_seed(0)
    model = ActorCritic(3, 2, False, (16,))
    obs, actions = torch.randn(8, 3), torch.randn(8, 2)
    dist = model.distribution(model._features(obs))
    log_prob, entropy, _ = model.evaluate(obs, actions)
    torch.testing.assert_close(log_prob, dist.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, dist.entropy().sum(-1))
    action, action_log_prob, _ = model.act(obs, deterministic=True)
    torch.testing.assert_close(action, dist.mean)
    torch.testing.assert_close(torch.from_numpy(model.greedy(obs.numpy())), action)
    torch.testing.assert_close(action_log_prob, dist.log_prob(action).sum(-1))


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
