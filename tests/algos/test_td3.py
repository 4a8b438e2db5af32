"""TD3's update against a hand computation on a tiny batch: the clipped double-Q
target with target policy smoothing (clipped noise, actions kept within the bounds;
truncation bootstrapped, termination not), the critics' Adam step, the actor and
the targets left alone between delayed turns, the deterministic policy gradient and
Polyak targets on the actor's turn; its acting within the bounds; its spaces."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.algos.offpolicy import UniformFirst
from pararl.algos.td3 import TD3Learner, check_spaces
from pararl.config.td3 import TD3Config
from pararl.errors import UsageError
from pararl.models import TwinQ
from pararl.models.acting import Draws
from pararl.models.deterministic import make_actor
from pararl.replay.nstep import Transitions

CPU = torch.device("cpu")
OBS, ACT, BATCH = 2, 1, 5
LOW, HIGH = np.array([-2.0], np.float32), np.array([2.0], np.float32)
LR, TAU, GAMMA = 1e-2, 0.25, 0.9


def learner() -> TD3Learner:
    torch.manual_seed(0)
    cfg = TD3Config(env="x", hidden=(4,), lr=LR, tau=TAU, policy_delay=2, target_noise=2.0)
    cfg = cfg.for_env("continuous").config
    actor = make_actor(OBS, ACT, cfg.hidden, LOW, HIGH, 0.1)
    return TD3Learner(actor, TwinQ(OBS, ACT, cfg.hidden), cfg, CPU, noise_seed=3)


def batch() -> Transitions:
    """Five transitions; the first ended by termination (discount 0), the others
    bootstrap (a truncation's discount is gamma^n like any other step's)."""
    rng = np.random.default_rng(0)
    discount = np.full(BATCH, GAMMA, np.float32)
    discount[0] = 0.0
    return Transitions(
        rng.standard_normal((BATCH, OBS)).astype(np.float32),
        rng.uniform(-2, 2, (BATCH, ACT)).astype(np.float32),
        rng.standard_normal(BATCH).astype(np.float32),
        rng.standard_normal((BATCH, OBS)).astype(np.float32),
        discount,
    )


def mlp_by_hand(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Linear, ReLU, Linear with the actor's weights as given."""
    w1, b1, w2, b2 = params
    return torch.relu(x @ w1.T + b1) @ w2.T + b2


def actor_by_hand(params: list[torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
    """pi(s) = 2 tanh(MLP(s)) on [-2, 2]."""
    return 2.0 * torch.tanh(mlp_by_hand(params, obs))


def critics_by_hand(critic: TwinQ, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """Each critic's MLP on [s, a], layer by layer: [2, B]."""
    x = torch.cat([obs, action], -1)
    out = []
    for j in range(2):
        h = x
        for i, (w, b) in enumerate(zip(critic.weights, critic.biases, strict=True)):
            h = h @ w[j] + b[j]
            if i < len(critic.weights) - 1:
                h = torch.relu(h)
        out.append(h.squeeze(-1))
    return torch.stack(out)


def adam_first_step(p: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Adam's first step from zero moments: p - lr g / (|g| + eps)."""
    return p - LR * grad / (grad.abs() + 1e-8)


def test_critic_step_then_delayed_actor_and_targets_by_hand() -> None:
    td3 = learner()
    b = batch()
    obs, action = torch.from_numpy(b.obs), torch.from_numpy(b.action)
    ret, next_obs, discount = (torch.from_numpy(x) for x in (b.ret, b.next_obs, b.discount))
    actor0 = [p.detach().clone() for p in td3.actor.parameters()]
    critic0 = copy.deepcopy(td3.critic)
    target_critic0 = copy.deepcopy(td3.critic_target)
    noise = torch.randn((BATCH, ACT), generator=copy.deepcopy(td3.generator))

    # target: the target actor's action, smoothed by clipped noise (2.0 sigma, clip 0.5,
    # times half the range 2), kept in [-2, 2]; the min of the target critics
    smoothing = (noise * 2.0).clamp(-0.5, 0.5) * 2.0
    assert (smoothing.abs() == 1.0).any()  # the clip bites
    next_action = (actor_by_hand(actor0, next_obs) + smoothing).clamp(-2.0, 2.0)
    y = ret + discount * critics_by_hand(target_critic0, next_obs, next_action).min(0).values
    assert y[0] == ret[0]  # termination: no bootstrap

    # critic loss: the squared errors of both critics, summed, averaged over the batch
    hand = copy.deepcopy(critic0)
    q = critics_by_hand(hand, obs, action)
    loss = ((q - y) ** 2).sum(0).mean()
    loss.backward()

    stats, td_error = td3.update(b)
    torch.testing.assert_close(stats["critic_loss"], loss.detach())
    torch.testing.assert_close(td_error, (y - q.detach()).abs().mean(0))
    for got, p in zip(td3.critic.parameters(), hand.parameters(), strict=True):
        assert p.grad is not None
        torch.testing.assert_close(got.detach(), adam_first_step(p.detach(), p.grad))
    # not the actor's turn (policy delay 2): the actor and every target stay
    for got, want in zip(td3.actor.parameters(), actor0, strict=True):
        assert torch.equal(got.detach(), want)
    for got, want in zip(td3.critic_target.parameters(), target_critic0.parameters(), strict=True):
        assert torch.equal(got, want)

    # second update: the actor's turn. Its loss is -Q_1(s, pi(s)) under the critics
    # after this update's own critic step; then every target moves tau toward its net
    critic1 = copy.deepcopy(td3.critic)
    target_actor1 = [p.detach().clone() for p in td3.actor_target.parameters()]
    target_critic1 = [p.detach().clone() for p in td3.critic_target.parameters()]
    td3.update(b)
    hand_actor = [p.clone().requires_grad_(True) for p in actor0]
    after_critic = copy.deepcopy(td3.critic)  # the critics as the actor step saw them
    actor_loss = -critics_by_hand(after_critic, obs, actor_by_hand(hand_actor, obs))[0].mean()
    actor_loss.backward()
    for got, p in zip(td3.actor.parameters(), hand_actor, strict=True):
        assert p.grad is not None
        torch.testing.assert_close(got.detach(), adam_first_step(p.detach(), p.grad))
    for got, old, online in zip(
        td3.actor_target.parameters(), target_actor1, td3.actor.parameters(), strict=True
    ):
        torch.testing.assert_close(got, old + TAU * (online.detach() - old))
    for got, old, online in zip(
        td3.critic_target.parameters(), target_critic1, td3.critic.parameters(), strict=True
    ):
        torch.testing.assert_close(got, old + TAU * (online.detach() - old))
    assert not all(
        torch.equal(a, b)
        for a, b in zip(critic1.parameters(), td3.critic.parameters(), strict=True)
    )  # the critics stepped again too
    assert td3.updates == 2


def test_acting_explores_within_the_bounds_and_greedy_is_the_actor() -> None:
    torch.manual_seed(0)
    actor = make_actor(OBS, ACT, (8,), LOW, HIGH, 0.5)
    obs = np.random.default_rng(0).standard_normal((4000, OBS)).astype(np.float32)
    first = np.ones(len(obs), bool)
    greedy = actor.act(obs, None, first, "greedy", Draws()).action
    with torch.no_grad():
        np.testing.assert_allclose(greedy, actor(torch.from_numpy(obs)).numpy())
    sampled = actor.act(obs, None, first, "sampled", Draws(np.random.default_rng(1))).action
    assert (sampled >= LOW).all()
    assert (sampled <= HIGH).all()
    inside = (np.abs(sampled) < 1.9).ravel()
    # the noise: 0.5 of half the range (2) = standard deviation 1 where not clipped
    assert np.std((sampled - greedy).ravel()[inside]) == pytest.approx(0.9, abs=0.15)
    policy = UniformFirst(lambda: actor, ACT, random_steps=10)
    uniform = policy.act(actor, obs, None, first, 9, np.random.default_rng(2)).action
    assert uniform.std() == pytest.approx(4 / np.sqrt(12), rel=0.05)  # U(-2, 2)
    after = policy.act(actor, obs, None, first, 10, np.random.default_rng(1)).action
    np.testing.assert_array_equal(after, sampled)  # the actor's own exploration


def test_spaces_td3_cannot_learn_are_refused_in_one_line() -> None:
    cfg = TD3Config(env="x")
    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(UsageError, match="needs a continuous"):
        check_spaces(cfg, box, gym.spaces.Discrete(2))
    with pytest.raises(UsageError, match="not finite"):
        check_spaces(cfg, box, gym.spaces.Box(-np.inf, np.inf, (1,), np.float32))
    with pytest.raises(UsageError, match="vector observations"):
        check_spaces(cfg, gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), box)


def test_a_resumed_learner_logs_the_last_actor_loss_until_its_next_actor_step() -> None:
    first = learner()
    for _ in range(2):  # policy_delay 2: the second update is the actor's
        stats, _ = first.update(batch())
    saved = float(stats["actor_loss"])
    assert saved != 0.0
    resumed = learner()
    resumed.load_state_dict(first.state_dict())
    stats, _ = resumed.update(batch())  # a critic-only update
    assert float(stats["actor_loss"]) == saved
