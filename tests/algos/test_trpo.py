"""TRPO's step: the KL bound holds and the surrogate improves, or theta is kept; MAML's
Gauss-Newton Fisher product equals the KL's Hessian at theta_old."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call

from pararl.algos.baseline import TaskBatch
from pararl.algos.maml import (
    CHUNK_BYTES,
    MAMLLearner,
    MetaBatch,
    adapt,
    adapted_outputs,
    chunk_size,
    episode_mean,
    gauss_newton_fisher,
    gaussian_kl,
    task_chunks,
)
from pararl.algos.trpo import TRPOHyper, conjugate_gradient, trpo_step
from pararl.config import MAMLConfig
from pararl.models.gaussian import GaussianMLP, gaussian_log_likelihood
from tests.algos.test_maml import linear_case


def policy_objective(penalty: float = 0.0):  # type: ignore[no-untyped-def]
    """The surrogate and KL of a linear Gaussian policy on fixed episodes, as a
    function of its flat parameters (KL against the first parameters it is given)."""
    model, batch, _ = linear_case(3)
    shapes = [(n, p.shape, p.numel()) for n, p in model.named_parameters()]
    old: list[tuple[torch.Tensor, torch.Tensor]] = []
    start: list[torch.Tensor] = []

    def objective(theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        params, offset = {}, 0
        for name, shape, size in shapes:
            params[name] = theta[offset : offset + size].view(shape)
            offset += size
        mean, log_std = functional_call(model, params, (batch.obs,))
        if not old:
            old.append((mean.detach(), log_std.detach()))
            start.append(theta.detach().clone())
        old_mean, old_log_std = old[0]
        ratio = torch.exp(
            gaussian_log_likelihood(batch.actions, mean, log_std)
            - gaussian_log_likelihood(batch.actions, old_mean, old_log_std)
        )
        loss = -episode_mean(ratio * batch.advantages, batch.mask).mean()
        loss = loss + penalty * (theta - start[0]).square().sum()
        kl = episode_mean(
            gaussian_kl(old_mean, old_log_std.expand_as(old_mean), mean, log_std), batch.mask
        ).mean()
        return loss, kl

    theta0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return objective, theta0


def test_conjugate_gradient_solves_a_positive_definite_system() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(5, 5))
    matrix = torch.from_numpy(a @ a.T + 5 * np.eye(5))
    b = torch.from_numpy(rng.normal(size=5))
    x = conjugate_gradient(lambda v: matrix @ v, b, iters=5)
    np.testing.assert_allclose((matrix @ x).numpy(), b.numpy(), atol=1e-8)


def test_step_improves_the_surrogate_within_the_kl_bound() -> None:
    for max_kl in (0.01, 0.001):
        objective, theta0 = policy_objective()
        result = trpo_step(objective, theta0, TRPOHyper(max_kl=max_kl))
        assert result.accepted
        assert result.ls_steps >= 1
        loss, kl = objective(result.theta)
        assert float(kl) <= max_kl
        assert abs(float(kl) - result.kl) < 1e-12
        assert float(loss) < result.loss_before
        assert not torch.equal(result.theta, theta0)
        # the full step goes to the edge of the trust region: close to the bound
        if result.ls_steps == 1:
            assert float(kl) > 0.5 * max_kl


def test_failed_line_search_returns_the_old_parameters() -> None:
    # a penalty the quadratic KL model does not see: every candidate worsens the loss
    objective, theta0 = policy_objective(penalty=1e4)
    result = trpo_step(objective, theta0, TRPOHyper(max_kl=0.01, ls_steps=3))
    assert not result.accepted
    assert result.ls_steps == 3
    assert torch.equal(result.theta, theta0)
    assert result.loss_after == result.loss_before
    assert result.kl == 0.0


def tasks(*seeds: int) -> TaskBatch:
    """One task per seed, each `linear_case`'s episodes, stacked along the task axis."""
    cases = [linear_case(s)[1] for s in seeds]
    return TaskBatch(
        *(torch.cat([getattr(c, f) for c in cases]) for f in ("obs", "actions", "rewards")),
        torch.cat([c.mask for c in cases]),
        torch.cat([c.advantages for c in cases]),
        np.concatenate([c.returns for c in cases]),
    )


def two_task_case() -> tuple[GaussianMLP, list[TaskBatch], TaskBatch]:
    """A tanh policy (hidden 3) and two tasks' train and valid episodes."""
    torch.manual_seed(0)
    model = GaussianMLP(2, 1, hidden=(3,), init_std=0.7).double()

    return model, [tasks(4, 5)], tasks(6, 7)


@pytest.mark.parametrize("first_order", [False, True])
def test_gauss_newton_product_equals_the_kl_hessian_at_theta_old(first_order: bool) -> None:
    model, train, valid = two_task_case()
    names = [(n, p.shape, p.numel()) for n, p in model.named_parameters()]

    def unflatten(theta: torch.Tensor) -> dict[str, torch.Tensor]:
        out, offset = {}, 0
        for name, shape, size in names:
            out[name] = theta[offset : offset + size].view(shape)
            offset += size
        return out

    theta_old = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    outputs = adapted_outputs(model, train, valid.obs, lr=0.5, first_order=first_order)
    product = gauss_newton_fisher(lambda t: outputs(unflatten(t)), theta_old, valid.mask)
    # the reference: differentiate the KL's gradient through the inner step again
    theta = theta_old.clone().requires_grad_()
    fast = adapt(model, unflatten(theta), train, 0.5, first_order=first_order)
    mean, log_std = model.forward_tasks(fast, valid.obs)
    old_mean, old_log_std = mean.detach(), log_std.detach().expand_as(mean)
    kl = episode_mean(gaussian_kl(old_mean, old_log_std, mean, log_std), valid.mask).mean()
    (grad_kl,) = torch.autograd.grad(kl, theta, create_graph=True)
    for seed in range(3):
        v = torch.randn(theta_old.shape, generator=torch.Generator().manual_seed(seed)).double()
        (hv,) = torch.autograd.grad(grad_kl @ v, theta, retain_graph=True)
        np.testing.assert_allclose(product(v).numpy(), hv.numpy(), rtol=1e-8, atol=1e-12)


def three_task_batch() -> MetaBatch:
    return MetaBatch([tasks(4, 5, 6)], tasks(7, 8, 9))


@pytest.mark.parametrize("fisher", ["gauss-newton", "autograd"])
def test_the_outer_step_in_chunks_of_tasks_equals_the_whole_batch(fisher: str) -> None:
    """The objective, its gradient and the Fisher products are sums over tasks: taking
    them a chunk of tasks at a time changes nothing but float rounding."""
    batch = three_task_batch()
    # three CG iterations stop short of its residual tolerance, where a rounding
    # difference would decide whether one more iteration runs
    cfg = MAMLConfig(fast_lr=0.5, max_kl=0.05, cg_iters=3)
    steps = {}
    for chunk in (1, 2, 3):
        torch.manual_seed(0)
        learner = MAMLLearner(
            GaussianMLP(2, 1, hidden=(3,), init_std=0.7).double(),
            cfg,
            torch.device("cpu"),
            fisher=fisher,
        )
        learner.task_chunk = chunk
        assert len(learner.chunks(batch)) == {1: 3, 2: 2, 3: 1}[chunk]
        stats = learner.step(batch)
        theta = torch.cat([p.detach().reshape(-1) for p in learner.model.parameters()])
        steps[chunk] = (stats, theta)
    whole_stats, whole_theta = steps[3]
    assert whole_stats["step_accepted"] == 1.0
    for stats, theta in (steps[1], steps[2]):
        np.testing.assert_allclose(theta.numpy(), whole_theta.numpy(), rtol=1e-9, atol=1e-12)
        for key, value in whole_stats.items():
            assert stats[key] == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_tasks_per_chunk_fit_the_chunk_bytes_on_a_cpu_and_are_all_on_a_gpu() -> None:
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert chunk_size(40, CHUNK_BYTES // 4, cpu) == 4
    assert chunk_size(40, CHUNK_BYTES * 3, cpu) == 1  # one task over the budget: one each
    assert chunk_size(40, CHUNK_BYTES // 4, gpu) == 40
    assert task_chunks(10, 4) == [slice(0, 4), slice(4, 8), slice(8, 10)]
