"""TRPO's step (Schulman et al. 2015) on a flat parameter vector.

    g      = grad L(theta_old)                       (L: the surrogate loss, minimised)
    F v    = grad (grad KL(theta_old) . v) + damping v  (Fisher-vector product; or a
             caller's exact product, e.g. MAML's Gauss-Newton form, plus damping v)
    x      = F^-1 g                                   (conjugate gradient, a few iterations)
    step   = sqrt(2 max_kl / x.F x) x                 (the largest step in the KL ball)
    theta  = theta_old - backtrack^i step, the first i with L < L(theta_old), KL <= max_kl;
             theta_old when no i of the line search qualifies

`objective(theta)` returns (L, KL) at `theta`, KL measured against the policy at
theta_old; it may be any differentiable function of theta (in MAML, theta is the
meta-parameters and both terms go through the inner adaptation step).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

Objective = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
Product = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class TRPOHyper:
    max_kl: float = 0.01
    cg_iters: int = 10
    damping: float = 1e-5
    ls_steps: int = 15
    backtrack: float = 0.8


@dataclass(frozen=True)
class TRPOResult:
    theta: torch.Tensor  # the new parameters (theta_old's values when not accepted)
    accepted: bool
    ls_steps: int  # line-search candidates evaluated
    loss_before: float
    loss_after: float  # the loss at `theta`
    kl: float  # KL(theta_old || theta) (0 when not accepted)


def conjugate_gradient(
    fvp: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, iters: int, tol: float = 1e-10
) -> torch.Tensor:
    """x with F x ~= b after at most `iters` iterations (F symmetric positive definite)."""
    x = torch.zeros_like(b)
    r, p = b.clone(), b.clone()
    r_dot_r = r @ r
    for _ in range(iters):
        z = fvp(p)
        alpha = r_dot_r / (p @ z)
        x += alpha * p
        r -= alpha * z
        new_r_dot_r = r @ r
        if new_r_dot_r < tol:
            break
        p = r + (new_r_dot_r / r_dot_r) * p
        r_dot_r = new_r_dot_r
    return x


def trpo_step(
    objective: Objective,
    theta_old: torch.Tensor,
    hyper: TRPOHyper,
    fisher: Product | None = None,
) -> TRPOResult:
    """One TRPO update of `theta_old`; see the module docstring. `fisher(v)`, when
    given, is the KL's Hessian at theta_old times v (undamped); otherwise that product
    is taken by differentiating the KL's gradient again."""
    theta = theta_old.detach().clone().requires_grad_()
    loss, kl = objective(theta)
    if fisher is None:
        # policy gradient of the surrogate, and the KL's gradient kept differentiable
        (g,) = torch.autograd.grad(loss, theta, retain_graph=True)
        (grad_kl,) = torch.autograd.grad(kl, theta, create_graph=True)

        def hessian(v: torch.Tensor) -> torch.Tensor:
            (hv,) = torch.autograd.grad(grad_kl @ v, theta, retain_graph=True)
            return hv

        fisher = hessian
    else:
        (g,) = torch.autograd.grad(loss, theta)
    product = fisher

    def fvp(v: torch.Tensor) -> torch.Tensor:
        # the Fisher at theta_old times v, damped
        return product(v) + hyper.damping * v

    # natural-gradient direction, then scaled to the edge of the trust region
    step_dir = conjugate_gradient(fvp, g, hyper.cg_iters)
    shs = 0.5 * float(step_dir @ fvp(step_dir))
    loss_before = float(loss.detach())
    base = theta_old.detach()
    if not (shs > 0 and math.isfinite(shs)):  # no gradient, or no curvature to trust
        return TRPOResult(base.clone(), False, 0, loss_before, loss_before, 0.0)
    full_step = step_dir.detach() / math.sqrt(shs / hyper.max_kl)

    # backtracking line search: improvement of the surrogate inside the KL bound
    for i in range(hyper.ls_steps):
        candidate = base - hyper.backtrack**i * full_step
        new_loss, new_kl = objective(candidate)
        new_loss, new_kl = new_loss.detach(), new_kl.detach()
        if float(new_loss) < loss_before and float(new_kl) <= hyper.max_kl:
            return TRPOResult(candidate, True, i + 1, loss_before, float(new_loss), float(new_kl))
    return TRPOResult(base.clone(), False, hyper.ls_steps, loss_before, loss_before, 0.0)


__all__ = ["Objective", "Product", "TRPOHyper", "TRPOResult", "conjugate_gradient", "trpo_step"]
