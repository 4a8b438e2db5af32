"""Gaussian policies: per-task parameters act (each task's envs run that task's adapted
policy), and one log-density serves acting and learning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.func import functional_call

from pararl.models.gaussian import (
    GaussianMLP,
    TaskPolicy,
    gaussian_log_likelihood,
    gaussian_log_prob,
)
from tests.samplers.meta.conftest import nav_sampler


def test_act_tasks_equals_each_rows_own_forward_pass() -> None:
    torch.manual_seed(0)
    model = GaussianMLP(3, 2, hidden=(8, 8))
    params = [
        {n: p.detach() + 0.3 * torch.randn_like(p) for n, p in model.params().items()}
        for _ in range(4)
    ]
    policy = TaskPolicy(model)
    policy.set_task_params({n: torch.stack([p[n] for p in params]) for n in params[0]})
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(11, 3)).astype(np.float32)
    noise = rng.normal(size=(11, 2)).astype(np.float32)
    tasks = np.array([3, 0, 3, 3, 1, 0, 3, 1, 3, 0, 3])  # uneven groups; task 2 absent
    actions, log_probs = policy.act_tasks(obs, noise, tasks)
    for i, j in enumerate(tasks):
        with torch.no_grad():
            mean, log_std = functional_call(model, params[j], (torch.from_numpy(obs[i : i + 1]),))
        expected = mean[0].numpy() + np.exp(log_std.numpy()) * noise[i]
        np.testing.assert_allclose(actions[i], expected, rtol=1e-5, atol=1e-6)
        want = -(0.5 * noise[i] ** 2 + log_std.numpy() + 0.5 * np.log(2 * np.pi)).sum()
        assert log_probs[i] == pytest.approx(want, rel=1e-5)
    policy.set_task_params(None)  # back to the meta-parameters for every row
    np.testing.assert_allclose(
        policy.act_tasks(obs, noise, tasks)[0], policy.with_noise(obs, noise)[0]
    )
    policy.set_task_params({n: torch.stack([p[n] for p in params[:2]]) for n in params[0]})
    with pytest.raises(ValueError, match="no parameters"):
        policy.act_tasks(obs, noise, tasks)


@pytest.mark.parametrize("recv", ["all", "timeout=0.0001"])
def test_each_tasks_envs_act_with_its_own_parameters(recv: str) -> None:
    model = GaussianMLP(2, 2, hidden=(), init_std=1e-3)
    moves = [np.array([0.05, 0.02]), np.array([-0.04, -0.03])]  # task 0 and task 1

    def adapted(move: np.ndarray, log_std: float) -> dict[str, torch.Tensor]:
        return {
            "body.0.weight": torch.zeros(2, 2),
            "body.0.bias": torch.tensor(move, dtype=torch.float32),
            "log_std": torch.full((2,), log_std),
        }

    policy = TaskPolicy(model)
    first, second = adapted(moves[0], -7.0), adapted(moves[1], -8.0)
    policy.set_task_params({n: torch.stack([first[n], second[n]]) for n in first})
    with nav_sampler(recv, "parallel", policy, workers=2, envs_per_worker=2) as sampler:
        tasks = sampler.sample_tasks(2, seed=3)
        result = sampler.sample(tasks, episodes_per_task=4, seed=5)
    for j, episodes in enumerate(result.episodes):
        assert episodes.task == tasks[j]
        real = episodes.mask
        np.testing.assert_allclose(
            episodes.actions[real], np.broadcast_to(moves[j], (real.sum(), 2)), atol=1e-2
        )
        # log-probabilities under the task's own log-std: -7 for task 0, -8 for task 1
        log_std = -7.0 - j
        z = (episodes.actions[real].astype(np.float64) - moves[j]) / np.exp(log_std)
        expected = -(0.5 * z**2 + log_std + 0.5 * np.log(2 * np.pi)).sum(-1)
        np.testing.assert_allclose(episodes.log_probs[real], expected, atol=2e-3)
        # the point walks towards its task's own direction
        final = episodes.next_observations[:, -1]
        np.testing.assert_allclose(final, np.broadcast_to(20 * moves[j], final.shape), atol=0.1)


def test_one_gaussian_log_prob_for_numpy_and_torch() -> None:
    """Acting (numpy, on the noise it drew) and learning (torch, on the actions) take
    the same density, and it is torch's Normal's."""
    rng = np.random.default_rng(0)
    mean, log_std = rng.normal(size=(5, 3)), rng.normal(size=3) * 0.3
    noise = rng.normal(size=(5, 3))
    actions = mean + np.exp(log_std) * noise
    acting = gaussian_log_prob(noise, log_std)
    learning = gaussian_log_likelihood(*map(torch.as_tensor, (actions, mean, log_std)))
    normal = torch.distributions.Normal(torch.as_tensor(mean), torch.as_tensor(np.exp(log_std)))
    reference = normal.log_prob(torch.as_tensor(actions)).sum(-1)
    np.testing.assert_allclose(acting, learning.numpy(), rtol=1e-12)
    np.testing.assert_allclose(acting, reference.numpy(), rtol=1e-12)
