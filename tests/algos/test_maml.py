"""MAML's inner step and advantages: the adapted parameters against a hand
computation, the outer gradient through the step against finite differences, and
the linear feature baseline."""

from __future__ import annotations

import numpy as np
import torch

from pararl.algos.baseline import LinearFeatureBaseline, TaskBatch, discounted_returns, padded_gae
from pararl.algos.maml import adapt, reinforce_loss
from pararl.models.gaussian import GaussianMLP


def linear_case(seed: int = 0) -> tuple[GaussianMLP, TaskBatch, dict[str, np.ndarray]]:
    """mean = w . x + b, one action dimension; 3 episodes of 4 steps, one cut short."""
    rng = np.random.default_rng(seed)
    model = GaussianMLP(2, 1, hidden=(), init_std=0.7).double()
    with torch.no_grad():
        model.body[0].weight.copy_(torch.tensor([[0.3, -0.2]]))
        model.body[0].bias.fill_(0.1)
    obs, actions, adv = (
        rng.normal(size=(3, 4, 2)),
        rng.normal(size=(3, 4, 1)),
        rng.normal(size=(3, 4)),
    )
    mask = np.ones((3, 4))
    mask[2, 2:] = 0.0  # the last episode ended after two steps

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(a)[None]

    batch = TaskBatch(t(obs), t(actions), t(np.zeros((3, 4))), t(mask), t(adv), np.zeros((1, 3)))
    return model, batch, {"obs": obs, "actions": actions, "adv": adv, "mask": mask}


def test_inner_step_matches_the_hand_computed_gradient() -> None:
    model, batch, d = linear_case()
    w, b, log_std = np.array([0.3, -0.2]), 0.1, np.log(0.7)
    mu = d["obs"] @ w + b
    z = (d["actions"][..., 0] - mu) / np.exp(log_std)
    # d log pi / d mean = z / sigma, d log pi / d log sigma = z^2 - 1
    weight = d["adv"] * d["mask"] / d["mask"].sum(1, keepdims=True) / 3  # per-episode mean
    grad_w = -(weight[..., None] * (z / np.exp(log_std))[..., None] * d["obs"]).sum((0, 1))
    grad_b = -(weight * z / np.exp(log_std)).sum()
    grad_log_std = -(weight * (z**2 - 1)).sum()
    lr = 0.1
    adapted = adapt(model, model.params(), [batch], lr)
    np.testing.assert_allclose(adapted["body.0.weight"].detach().numpy()[0, 0], w - lr * grad_w)
    np.testing.assert_allclose(adapted["body.0.bias"].detach().numpy()[0, 0], b - lr * grad_b)
    np.testing.assert_allclose(
        adapted["log_std"].detach().numpy()[0, 0], log_std - lr * grad_log_std
    )


def test_outer_gradient_goes_through_the_inner_step() -> None:
    model, batch, _ = linear_case(1)
    _, valid, _ = linear_case(2)

    def outer(flat: torch.Tensor, first_order: bool = False) -> torch.Tensor:
        params, offset = {}, 0
        for n, p in model.named_parameters():
            params[n] = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
        fast = adapt(model, params, [batch], lr=0.5, first_order=first_order)
        return reinforce_loss(model, fast, valid).sum()

    theta = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).requires_grad_()
    (second,) = torch.autograd.grad(outer(theta), theta)
    numeric = torch.zeros_like(theta)
    for i in range(theta.numel()):
        e = torch.zeros_like(theta)
        e[i] = 1e-6
        numeric[i] = (outer(theta.detach() + e) - outer(theta.detach() - e)).detach() / 2e-6
    np.testing.assert_allclose(second.numpy(), numeric.numpy(), rtol=1e-5, atol=1e-8)
    (first,) = torch.autograd.grad(outer(theta, first_order=True), theta)
    assert not torch.allclose(first, second)  # first-order MAML drops the Hessian term


def test_linear_baseline_fits_returns_that_are_linear_in_its_features() -> None:
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(rng.normal(size=(2, 5, 6, 3)).astype(np.float32))
    mask = torch.ones(2, 5, 6)
    mask[1, 0, 4:] = 0
    features = LinearFeatureBaseline.features(obs, mask)
    assert features.shape == (2, 5, 6, 3 * 2 + 4)
    # rewards whose discounted returns are exactly features . w_task: the fit recovers them
    w = torch.from_numpy(rng.normal(size=(2, 1, 1, 10)).astype(np.float32))
    target = (features * w).sum(-1)
    gamma = 0.9
    next_target = torch.cat([target[..., 1:], torch.zeros_like(target[..., :1])], -1)
    rewards = (target - gamma * next_target * mask) * mask
    np.testing.assert_allclose(discounted_returns(rewards, mask, gamma), target, atol=1e-4)
    values = LinearFeatureBaseline.fit_predict(obs, rewards, mask, gamma)
    np.testing.assert_allclose(values * mask, target, atol=2e-3)
    # with the exact baseline, GAE(1) advantages (return - value) vanish
    assert padded_gae(rewards, values, mask, gamma, 1.0).abs().max() < 5e-3
