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
    sampled, sampled_log_prob, _ = model.act_tensors(obs)
    torch.testing.assert_close(sampled_log_prob, dist.log_prob(sampled))
    greedy, _, _ = model.act_tensors(obs, deterministic=True)
    assert torch.equal(greedy, dist.probs.argmax(-1))
    assert torch.equal(torch.from_numpy(model.greedy(obs.numpy())), greedy)
    many = model.act_tensors(obs[:1].expand(20_000, 4))[0]  # sampling follows the probabilities
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
    action, action_log_prob, _ = model.act_tensors(obs, deterministic=True)
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


def _reference_update(
    model: ActorCritic, batch: dict[str, torch.Tensor], epochs: int, clip: float
) -> None:
    """PPO as written in the papers, step by step: SB3's loss (no value clipping,
    MSE value loss x 0.5), advantages normalised per minibatch, torch's Adam and
    gradient clipping, one minibatch holding the whole batch."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-5)
    for _ in range(epochs):
        dist = model.distribution(model._features(batch["obs"]))
        ratio = (dist.log_prob(batch["actions"]) - batch["logprobs"]).exp()
        adv = batch["advantages"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        value = model.value(batch["obs"])
        loss = pg + 0.5 * torch.nn.functional.mse_loss(value, batch["returns"])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()


def test_update_matches_a_step_by_step_reference() -> None:
    import copy

    import numpy as np

    from pararl.algos.ppo import PPOHyper, PPOLearner

    torch.manual_seed(0)
    model = ActorCritic(4, 2, True, (16, 16))
    reference = copy.deepcopy(model)
    rng = np.random.default_rng(1)
    n = 64
    batch = {
        "obs": rng.normal(size=(n, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, n),
        "logprobs": np.full(n, -0.7, np.float32),
        "advantages": rng.normal(size=n).astype(np.float32),
        "returns": rng.normal(size=n).astype(np.float32),
        "values": rng.normal(size=n).astype(np.float32),
    }
    learner = PPOLearner(
        model, PPOHyper(update_epochs=5, num_minibatches=1), 1e-3, torch.device("cpu")
    )
    stats = learner.update(batch, rng)
    _reference_update(reference, {k: torch.as_tensor(v) for k, v in batch.items()}, 5, 0.2)
    for ours, theirs in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert learner.updates == 5
    assert set(stats) == {"pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac"}
    assert stats["approx_kl"] > 0  # the last epoch's policy moved away from the data's


def test_initial_weights_do_not_depend_on_the_thread_count() -> None:
    """Orthogonal init runs a QR decomposition, whose result changes with torch's
    thread count: the same seed must still give the same network."""
    threads = torch.get_num_threads()
    made = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            torch.manual_seed(0)
            made.append(ActorCritic(17, 6, False, (64, 64)).state_dict())
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(made[0][k], made[1][k]) for k in made[0])
