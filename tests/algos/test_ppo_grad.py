"""The hand-written PPO gradient equals autograd's, for every head, body and loss
option, including samples on both sides of both clip windows."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch
from torch import nn

from pararl.algos import ppo_grad
from pararl.algos.ppo import PPOHyper, PPOLearner
from pararl.models import ActorCritic
from pararl.optim import FlatAdam

N, OBS = 96, 5


def _batch(model: ActorCritic, discrete: bool, action_dim: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    obs = torch.randn(N, OBS, generator=g)
    actions = (
        torch.randint(0, action_dim, (N,), generator=g)
        if discrete
        else torch.randn(N, action_dim, generator=g)
    )
    with torch.no_grad():
        logprobs, _, values = model.evaluate(obs, actions)
    # old log-probabilities and values off by enough that many samples fall outside
    # the surrogate's and the value's clip windows, on both sides
    return {
        "obs": obs,
        "actions": actions,
        "logprobs": logprobs + 0.4 * torch.randn(N, generator=g),
        "advantages": torch.randn(N, generator=g),
        "returns": torch.randn(N, generator=g),
        "values": values + 0.4 * torch.randn(N, generator=g),
    }


def _grads(
    learner: PPOLearner, mb: dict[str, torch.Tensor], manual: bool
) -> tuple[torch.Tensor, dict[str, float]]:
    learner.manual_grad = manual
    opt = learner.optimizer
    opt.zero_grad()
    adv = mb["advantages"]
    if manual:
        out = ppo_grad.loss_and_grad(learner.model, learner._terms(mb, adv))
    else:
        out = learner._autograd_loss(mb, adv)
    losses = {k: float(out[k].detach()) for k in ("pg_loss", "v_loss", "entropy")}
    return opt.flat_grad.clone(), losses


CASES = list(
    itertools.product([True, False], [False, True], [False, True], [0.0, 0.05], [(8,), (16, 12)])
)


@pytest.mark.parametrize(("discrete", "shared", "clip_vloss", "ent_coef", "hidden"), CASES)
def test_gradient_equals_autograd(
    discrete: bool, shared: bool, clip_vloss: bool, ent_coef: float, hidden: tuple[int, ...]
) -> None:
    torch.manual_seed(0)
    action_dim = 3
    model = ActorCritic(OBS, action_dim, discrete, hidden, shared)
    if not discrete:
        with torch.no_grad():
            model.log_std.copy_(torch.tensor([-0.3, 0.0, 0.4]))
    hyper = PPOHyper(clip_coef=0.2, clip_vloss=clip_vloss, ent_coef=ent_coef, vf_coef=0.7)
    learner = PPOLearner(model, hyper, 1e-3, torch.device("cpu"))
    assert learner.manual_grad
    mb = _batch(model, discrete, action_dim)
    ratio = (model.evaluate(mb["obs"], mb["actions"])[0] - mb["logprobs"]).exp()
    assert (ratio > 1.2).any()  # both clip edges are exercised
    assert (ratio < 0.8).any()

    manual, manual_losses = _grads(learner, mb, manual=True)
    reference, reference_losses = _grads(learner, mb, manual=False)
    assert reference.abs().max() > 0
    torch.testing.assert_close(manual, reference, rtol=1e-4, atol=1e-6)
    for key, value in manual_losses.items():
        assert value == pytest.approx(reference_losses[key], rel=1e-5, abs=1e-7), key


def test_gradients_are_overwritten_not_accumulated() -> None:
    torch.manual_seed(0)
    model = ActorCritic(OBS, 2, True, (8,))
    learner = PPOLearner(model, PPOHyper(), 1e-3, torch.device("cpu"))
    mb = _batch(model, True, 2)
    learner.optimizer.flat_grad.fill_(123.0)  # stale values must not survive
    ppo_grad.loss_and_grad(model, learner._terms(mb, mb["advantages"]))
    first = learner.optimizer.flat_grad.clone()
    ppo_grad.loss_and_grad(model, learner._terms(mb, mb["advantages"]))
    torch.testing.assert_close(learner.optimizer.flat_grad, first)
    assert first.abs().max() < 100


def test_whole_updates_match_autograd_updates() -> None:
    torch.manual_seed(0)
    manual_model = ActorCritic(4, 2, True, (16, 16))
    autograd_model = copy.deepcopy(manual_model)
    rng = np.random.default_rng(0)
    batch = {
        "obs": rng.normal(size=(128, 4)).astype(np.float32),
        "actions": rng.integers(0, 2, 128),
        "logprobs": np.full(128, -0.69, np.float32),
        "advantages": rng.normal(size=128).astype(np.float32),
        "returns": rng.normal(size=128).astype(np.float32),
        "values": np.zeros(128, np.float32),
    }
    hyper = PPOHyper(update_epochs=4, num_minibatches=2)
    stats = []
    for model, manual in ((manual_model, True), (autograd_model, False)):
        learner = PPOLearner(
            model, PPOHyper(**{**hyper.__dict__, "manual_grad": manual}), 1e-3, torch.device("cpu")
        )
        assert learner.manual_grad is manual
        stats.append(learner.update(batch, np.random.default_rng(7)))
    for ours, theirs in zip(manual_model.parameters(), autograd_model.parameters(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)
    for key in stats[0]:
        assert stats[0][key] == pytest.approx(stats[1][key], rel=1e-3, abs=1e-6)


def test_other_models_fall_back_to_autograd() -> None:
    model = ActorCritic(4, 2, True, (8,))
    assert ppo_grad.supports(model)
    model.actor[1] = nn.ReLU()  # not a Linear/Tanh chain any more
    assert not ppo_grad.supports(model)
    learner = PPOLearner(model, PPOHyper(), 1e-3, torch.device("cpu"))
    assert not learner.manual_grad
    assert not ppo_grad.supports(nn.Linear(2, 2))


def test_optimizer_views_receive_the_gradient() -> None:
    model = ActorCritic(4, 2, False, (8,))
    opt = FlatAdam(model.parameters())
    opt.zero_grad()
    for p in model.parameters():
        assert p.grad is not None
        assert p.grad.data_ptr() >= opt.flat_grad.data_ptr()
