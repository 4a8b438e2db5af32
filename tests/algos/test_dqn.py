"""The DQN update: TD targets bootstrap through truncation, not through termination."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pararl.algos.dqn import DQNLearner
from pararl.config import DQNConfig
from pararl.models import QNetwork, num_params
from pararl.replay.nstep import Transitions
from pararl.weights.shared import flat_to_params, params_to_flat


def constant_q(value: float) -> QNetwork:
    """A Q-network that outputs `value` for every action (zero weights, bias = value)."""
    q = QNetwork(2, 2, hidden=(4,))
    with torch.no_grad():
        for p in q.parameters():
            p.zero_()
        q.net[-1].bias.fill_(value)
    return q


def test_td_target_uses_discount_zero_after_termination() -> None:
    cfg = DQNConfig(lr=1e-9, gamma=0.9, double_dqn=False).for_env("discrete").config
    learner = DQNLearner(constant_q(5.0), cfg, torch.device("cpu"))
    obs = np.zeros((2, 2), np.float32)
    # transition 0: truncated after 1 step (discount gamma); 1: terminated (discount 0)
    batch = Transitions(obs, np.array([0, 1]), np.array([1.0, 1.0]), obs, np.array([0.9, 0.0]))
    _, td_error = learner.update(batch)
    target = td_error + 5.0  # the TD error is the target minus Q(s, a) = 5
    assert target.tolist() == pytest.approx([1.0 + 0.9 * 5.0, 1.0])


def test_importance_weights_scale_each_sample_loss() -> None:
    """Weights (prioritized replay) multiply each sample's Huber loss: weight 0 on a
    sample removes its gradient (Adam's first step is the gradient's sign, so the
    other sample's step alone is the same as a batch of that sample)."""
    cfg = (
        DQNConfig(lr=1e-2, gamma=0.9, double_dqn=False, max_grad_norm=1e9)
        .for_env("discrete")
        .config
    )
    obs = np.array([[1.0, -2.0], [-3.0, 0.5]], np.float32)
    batch = Transitions(obs, np.array([0, 1]), np.array([1.0, -4.0]), obs, np.zeros(2))

    def net() -> QNetwork:
        torch.manual_seed(0)
        return QNetwork(2, 2, hidden=(4,))

    grads = []
    for weights in (np.array([1.0, 0.0]), np.array([1.0, 1.0])):
        learner = DQNLearner(net(), cfg, torch.device("cpu"))
        before = params_of(learner.q)
        learner.update(batch, weights)
        grads.append(params_of(learner.q) - before)
    assert not np.allclose(grads[0], grads[1])
    only_first = DQNLearner(net(), cfg, torch.device("cpu"))
    before = params_of(only_first.q)
    only_first.update(batch.rows(slice(0, 1)))
    np.testing.assert_allclose(params_of(only_first.q) - before, grads[0], atol=1e-6)


def params_of(q: QNetwork) -> np.ndarray:
    flat = np.zeros(num_params(q), np.float32)
    params_to_flat(q, flat)
    return flat


def test_hard_target_update_period() -> None:
    cfg = DQNConfig(lr=1e-2, target_update=3).for_env("discrete").config
    learner = DQNLearner(QNetwork(2, 2, (8,)), cfg, torch.device("cpu"))
    rng = np.random.default_rng(0)
    batch = Transitions(
        rng.normal(size=(16, 2)).astype(np.float32),
        rng.integers(0, 2, 16),
        rng.normal(size=16),
        rng.normal(size=(16, 2)).astype(np.float32),
        np.full(16, 0.99),
    )

    def same() -> bool:
        return all(
            torch.equal(a, b)
            for a, b in zip(learner.q.parameters(), learner.q_target.parameters(), strict=True)
        )

    learner.update(batch)
    learner.update(batch)
    assert not same()
    learner.update(batch)
    assert same()


def test_flat_params_round_trip() -> None:
    a, b = QNetwork(3, 2, (5, 5)), QNetwork(3, 2, (5, 5))
    flat = np.zeros(num_params(a), np.float32)
    params_to_flat(a, flat)
    flat_to_params(flat, b)
    x = torch.randn(4, 3)
    assert torch.equal(a(x), b(x))
