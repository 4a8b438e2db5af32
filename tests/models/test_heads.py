"""Action heads: log-probabilities and entropies against hand computations, masks
that keep every draw legal, and heads that a checkpoint describes and builds again."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl.models import ActorCritic
from pararl.models.acting import Draws, starts
from pararl.models.heads import (
    MASKED,
    Bernoulli,
    Categorical,
    Gaussian,
    MultiCategorical,
    head_for,
    head_from,
)

NO_STD = torch.zeros(0)


def test_masked_log_prob_and_entropy_are_the_legal_actions_softmax() -> None:
    """Logits (1, 2, 3, 4) with actions 1 and 3 illegal: the policy is the softmax of
    (1, 3) over actions 0 and 2, written out by hand."""
    out = torch.tensor([[1.0, 2.0, 3.0, 4.0]], requires_grad=True)
    mask = torch.tensor([[True, False, True, False]])
    head = Categorical(4)
    e1, e3 = math.exp(1.0), math.exp(3.0)
    p0, p2 = e1 / (e1 + e3), e3 / (e1 + e3)
    log_prob, entropy = head.evaluate(out, NO_STD, torch.tensor([2]), mask)
    assert log_prob.item() == pytest.approx(math.log(p2), rel=1e-6)
    assert entropy.item() == pytest.approx(-(p0 * math.log(p0) + p2 * math.log(p2)), rel=1e-6)
    # no gradient reaches an illegal action's logit, through the log-prob or the entropy
    (log_prob + entropy).sum().backward()
    assert out.grad is not None
    assert out.grad[0, 1] == 0
    assert out.grad[0, 3] == 0
    assert out.grad[0, 0] != 0
    assert out.grad[0, 2] != 0
    # an illegal action's probability is exactly 0
    illegal, _ = head.evaluate(out, NO_STD, torch.tensor([3]), mask)
    assert illegal.item() < MASKED / 2


def test_masked_draws_and_greedy_actions_are_legal() -> None:
    torch.manual_seed(0)
    out = torch.randn(2_000, 5) * 3
    mask = torch.rand(2_000, 5) < 0.4
    mask[torch.arange(2_000), torch.randint(0, 5, (2_000,))] = True  # one legal at least
    head = Categorical(5)
    for generator in (None, torch.Generator().manual_seed(1)):
        action, log_prob = head.sample(out, NO_STD, generator, mask)
        assert mask[torch.arange(2_000), action].all()
        expected, _ = head.evaluate(out, NO_STD, action, mask)
        torch.testing.assert_close(log_prob, expected)
    greedy = head.greedy(out, mask)
    assert mask[torch.arange(2_000), greedy].all()
    best = out.masked_fill(~mask, -torch.inf).max(-1).values
    torch.testing.assert_close(out[torch.arange(2_000), greedy], best)


def test_without_a_mask_the_categorical_is_torchs() -> None:
    out, actions = torch.randn(64, 3), torch.randint(0, 3, (64,))
    log_prob, entropy = Categorical(3).evaluate(out, NO_STD, actions, None)
    dist = torch.distributions.Categorical(logits=out)
    torch.testing.assert_close(log_prob, dist.log_prob(actions))
    torch.testing.assert_close(entropy, dist.entropy())


def test_multi_categorical_sums_its_dimensions_and_masks_each() -> None:
    """MultiDiscrete([3, 2]): log-prob and entropy are the two categoricals' sums; a
    flat mask is the dimensions' masks one after another."""
    head = MultiCategorical(np.array([3, 2]), np.zeros(2, np.int64), np.dtype(np.int64))
    assert (head.logits, head.mask_size, head.action_shape) == (5, 5, (2,))
    out = torch.randn(16, 5)
    actions = torch.stack([torch.randint(0, 3, (16,)), torch.randint(0, 2, (16,))], -1)
    log_prob, entropy = head.evaluate(out, NO_STD, actions, None)
    first = torch.distributions.Categorical(logits=out[:, :3])
    second = torch.distributions.Categorical(logits=out[:, 3:])
    torch.testing.assert_close(
        log_prob, first.log_prob(actions[:, 0]) + second.log_prob(actions[:, 1])
    )
    torch.testing.assert_close(entropy, first.entropy() + second.entropy())
    # masked: the first dimension allows 0 and 2, the second only 1
    mask = torch.tensor([[True, False, True, False, True]]).expand(16, 5)
    drawn, drawn_log_prob = head.sample(out, NO_STD, torch.Generator().manual_seed(0), mask)
    assert set(drawn[:, 0].tolist()) <= {0, 2}
    assert set(drawn[:, 1].tolist()) == {1}
    legal = torch.distributions.Categorical(logits=out[:, [0, 2]])
    index = torch.where(drawn[:, 0] == 2, 1, 0)
    torch.testing.assert_close(drawn_log_prob, legal.log_prob(index))  # log 1 = 0 for dim 2
    _, masked_entropy = head.evaluate(out, NO_STD, drawn, mask)
    torch.testing.assert_close(masked_entropy, legal.entropy())
    assert mask[0, head.greedy(out, mask)[:, 0]].all()


def test_multi_discrete_start_and_shape_come_back_in_the_actions() -> None:
    space = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 2]]), start=np.array([[1, -1], [0, 5]]))
    head = head_for(space)
    out = torch.randn(100, head.logits)
    for action in (head.sample(out, NO_STD, None, None)[0], head.greedy(out, None)):
        assert action.shape == (100, 2, 2)
        assert all(space.contains(a) for a in action.numpy().astype(space.dtype))
    action, log_prob = head.sample(out, NO_STD, torch.Generator().manual_seed(0), None)
    torch.testing.assert_close(head.evaluate(out, NO_STD, action, None)[0], log_prob)


def test_bernoulli_log_prob_entropy_and_greedy() -> None:
    head = head_for(gym.spaces.MultiBinary(3))
    assert isinstance(head, Bernoulli)
    assert head.action_dtype == np.int8
    out = torch.randn(32, 3)
    bits = torch.randint(0, 2, (32, 3)).to(torch.int8)
    log_prob, entropy = head.evaluate(out, NO_STD, bits, None)
    dist = torch.distributions.Bernoulli(logits=out)
    torch.testing.assert_close(log_prob, dist.log_prob(bits.float()).sum(-1))
    torch.testing.assert_close(entropy, dist.entropy().sum(-1))
    greedy = head.greedy(out, None)
    assert greedy.dtype == torch.int8
    assert (greedy == (torch.sigmoid(out) > 0.5).to(torch.int8)).all()
    drawn, drawn_log_prob = head.sample(out, NO_STD, torch.Generator().manual_seed(0), None)
    torch.testing.assert_close(drawn_log_prob, head.evaluate(out, NO_STD, drawn, None)[0])


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Discrete(4),
        gym.spaces.MultiDiscrete([3, 4]),
        gym.spaces.MultiDiscrete(np.array([[2, 3]]), start=np.array([[1, 0]])),
        gym.spaces.MultiBinary([2, 2]),
        gym.spaces.Box(-1.0, 1.0, (3,)),
    ],
)
def test_a_saved_head_is_built_again_the_same(space: gym.Space) -> None:
    head = head_for(space)
    again = head_from(head.describe())
    assert type(again) is type(head)
    assert again.describe() == head.describe()
    out, log_std = torch.randn(8, head.logits), torch.zeros(head.logits)
    action = head.greedy(out, None)
    torch.testing.assert_close(again.greedy(out, None), action)
    torch.testing.assert_close(
        again.evaluate(out, log_std, action, None), head.evaluate(out, log_std, action, None)
    )


def test_an_actor_critic_of_multi_discrete_actions_acts_in_the_space() -> None:
    """The acting call gives actions of the space's shape and dtype, greedy or sampled
    (from a generator or the global stream), within a mask when given one."""
    space = gym.spaces.MultiDiscrete([3, 4])
    head = head_for(space)
    model = ActorCritic(5, head.logits, True, (8,), head=head)
    obs = np.random.default_rng(0).normal(size=(64, 5)).astype(np.float32)
    mask = np.ones((64, 7), bool)
    mask[:, [0, 2, 3, 4]] = False  # dimension 0 allows 1, dimension 1 allows 1, 2, 3
    for mode, draws in [
        ("greedy", Draws()),
        ("sampled", Draws()),
        ("sampled", Draws(generator=torch.Generator().manual_seed(0))),
    ]:
        acted = model.act(obs, None, starts(64), mode, draws, mask)  # type: ignore[arg-type]
        assert acted.action.shape == (64, 2)
        assert acted.action.dtype == space.dtype
        assert (acted.action[:, 0] == 1).all()
        assert (acted.action[:, 1] != 0).all()
        if mode == "sampled":
            assert acted.logprob is not None
            log_prob, _, _ = model.evaluate(
                torch.as_tensor(obs), torch.as_tensor(acted.action), torch.as_tensor(mask)
            )
            np.testing.assert_allclose(acted.logprob, log_prob.detach().numpy(), rtol=1e-5)


def test_a_gaussian_head_is_a_box_and_takes_no_mask() -> None:
    head = head_for(gym.spaces.Box(-1.0, 1.0, (2, 3)))
    assert isinstance(head, Gaussian)
    assert head.logits == 6
    assert not head.discrete
    assert head.mask_size == 0
