"""The MLPs' tanh: `torch.tanh` on small batches, 2 * sigmoid(2x) - 1 on the CPU's
large ones; either way tanh's values, gradients and second derivatives."""

from __future__ import annotations

import pytest
import torch

from pararl.models.tanh import FAST_FROM, Tanh, tanh


@pytest.mark.parametrize("rows", [8, FAST_FROM // 64, 4 * FAST_FROM // 64])
def test_values_and_derivatives_are_tanhs(rows: int) -> None:
    torch.manual_seed(0)
    x = torch.randn(rows, 64) * 3
    x[0, :4] = torch.tensor([0.0, 1e-6, -30.0, 30.0])  # zero, tiny, saturated both ways
    x.requires_grad_()
    exact = x.detach().double().requires_grad_()
    y, ref = Tanh()(x), torch.tanh(exact)
    torch.testing.assert_close(y.double(), ref, rtol=0, atol=2e-7)
    weights = torch.randn_like(exact)
    (g,) = torch.autograd.grad((y * weights.float()).sum(), x, create_graph=True)
    (g_ref,) = torch.autograd.grad((ref * weights).sum(), exact, create_graph=True)
    torch.testing.assert_close(g.double(), g_ref, rtol=0, atol=2e-6)  # weights up to ~5
    # second derivatives (TRPO's Hessian-vector products go through them)
    (h,) = torch.autograd.grad(g.sum(), x)
    (h_ref,) = torch.autograd.grad(g_ref.sum(), exact)
    torch.testing.assert_close(h.double(), h_ref, rtol=0, atol=5e-6)


def test_small_batches_and_other_dtypes_are_torch_tanh_bit_for_bit() -> None:
    small = torch.randn(FAST_FROM // 64 - 1, 64)
    assert torch.equal(tanh(small), torch.tanh(small))
    wide = torch.randn(FAST_FROM, dtype=torch.float64)
    assert torch.equal(tanh(wide), torch.tanh(wide))
    big = torch.randn(FAST_FROM)
    assert not torch.equal(tanh(big), torch.tanh(big))  # the other formula did run


def test_under_no_grad_the_input_is_left_as_it_was() -> None:
    x = torch.randn(FAST_FROM)
    before = x.clone()
    with torch.no_grad():
        y = tanh(x)
    assert torch.equal(x, before)
    torch.testing.assert_close(y, torch.tanh(x), rtol=0, atol=2e-7)


def test_torch_func_transforms_take_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`vmap(grad(...))` over stacked weights, as the stacked-layers benchmark runs it:
    the fast path runs under the transform, with tanh's gradients."""
    from torch.func import grad, vmap

    from pararl.models import tanh as module

    calls = []
    apply = module._SigmoidTanh.apply
    monkeypatch.setattr(module._SigmoidTanh, "apply", lambda x: calls.append(1) or apply(x))
    torch.manual_seed(1)
    weights, x = torch.randn(3, 64, 64), torch.randn(FAST_FROM // 64, 64)

    def loss(w: torch.Tensor, act: object) -> torch.Tensor:
        return act(x @ w).square().sum()  # type: ignore[operator]

    ours = vmap(grad(lambda w: loss(w, tanh)))(weights)
    assert calls
    theirs = vmap(grad(lambda w: loss(w, torch.tanh)))(weights)
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


def test_the_tanh_networks_use_it() -> None:
    """PPO's actor-critic (shared body or not) and the Gaussian policy: no `nn.Tanh` left."""
    from torch import nn

    from pararl.models.gaussian import GaussianMLP
    from pararl.models.networks import ActorCritic

    for net in (ActorCritic(4, 2, True), ActorCritic(4, 2, False, shared=True), GaussianMLP(4, 2)):
        kinds = {type(m) for m in net.modules()}
        assert Tanh in kinds
        assert nn.Tanh not in kinds
