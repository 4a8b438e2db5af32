"""SAC's networks: the squashed Gaussian's log-density against a numerical density
(the derivative of its CDF), finite where tanh saturates; deterministic actions are
tanh of the mean scaled to the bounds; the twin critics are two separate MLPs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pararl.models import TwinQ, squashed_actor
from pararl.models.squashed import SquashedGaussianActor

LOW, HIGH = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)


def fixed_gaussian(mean: list[float], log_std: list[float]) -> SquashedGaussianActor:
    """An actor whose x ~ N(mean, exp(log_std)^2) whatever the observation."""
    actor = squashed_actor(1, 2, (4,), LOW, HIGH)
    with torch.no_grad():
        actor.head.weight.zero_()
        actor.head.bias.copy_(torch.tensor([*mean, *log_std]))
    return actor


def normal_cdf(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0)))


def test_log_prob_is_the_density_of_the_scaled_tanh() -> None:
    """p(a) = dF/da, F(a) = P(scale tanh(x) + bias <= a) = Phi((atanh((a - bias) /
    scale) - mean) / std), by central differences, dimension by dimension; the two
    dimensions' log-densities add up."""
    mean, log_std = np.array([0.3, -0.4]), np.array([-0.2, 0.5])
    actor = fixed_gaussian(mean.tolist(), log_std.tolist())
    scale, bias = (HIGH - LOW) / 2, (HIGH + LOW) / 2
    u = np.linspace(-0.97, 0.97, 41)[:, None].repeat(2, 1)  # tanh(x), away from the ends
    a = scale * u + bias
    std = np.exp(log_std)
    noise = (np.arctanh(u) - mean) / std
    _, log_prob = actor.sample(torch.zeros(len(a), 1), torch.tensor(noise, dtype=torch.float32))

    def cdf(actions: np.ndarray) -> np.ndarray:
        return normal_cdf((np.arctanh((actions - bias) / scale) - mean) / std)

    h = 1e-4 * scale
    numerical = (cdf(a + h) - cdf(a - h)) / (2 * h)  # [N, 2], each dimension's density
    expected = np.log(numerical).sum(1)
    np.testing.assert_allclose(log_prob.detach().numpy(), expected, rtol=2e-4, atol=2e-4)


def test_the_density_integrates_to_one_and_stays_finite_where_tanh_saturates() -> None:
    """One dimension on [-2, 2]: over x within +-12 std (all the mass), the density of
    a = 2 tanh(x) integrates to 1 in a; where tanh(x) rounds to +-1 in float32, the
    log-density is still a finite number (log(1 - tanh^2) there would be -inf)."""
    actor = squashed_actor(1, 1, (4,), np.array([-2.0], np.float32), np.array([2.0], np.float32))
    with torch.no_grad():
        actor.head.weight.zero_()
        actor.head.bias.copy_(torch.tensor([0.5, 0.0]))
    z = np.linspace(-12.0, 12.0, 400_001)
    _, log_prob = actor.sample(torch.zeros(len(z), 1), torch.tensor(z[:, None]))
    density = np.exp(log_prob.detach().numpy())
    a = 2.0 * np.tanh(z + 0.5)
    assert np.trapezoid(density, a) == pytest.approx(1.0, abs=1e-3)
    _, at_the_end = actor.sample(torch.zeros(1, 1), torch.tensor([[12.0]], dtype=torch.float32))
    assert torch.tanh(torch.tensor(12.5, dtype=torch.float32)) == 1.0
    assert torch.isfinite(at_the_end).all()


def test_greedy_is_tanh_of_the_mean_scaled_to_the_bounds() -> None:
    actor = fixed_gaussian([0.3, -3.0], [1.0, 1.0])
    got = actor.greedy(np.zeros((2, 1), np.float32))
    want = (HIGH - LOW) / 2 * np.tanh([0.3, -3.0]) + (HIGH + LOW) / 2
    np.testing.assert_allclose(got, np.stack([want, want]), rtol=1e-5, atol=1e-7)
    draws = actor.with_noise(
        np.zeros((1000, 1), np.float32),
        np.random.default_rng(0).standard_normal((1000, 2), np.float32),
    )
    assert (draws >= LOW).all()
    assert (draws <= HIGH).all()
    uniform = actor.uniform(4000, np.random.default_rng(1))
    assert (uniform >= LOW).all()
    assert (uniform <= HIGH).all()
    np.testing.assert_allclose(uniform.mean(0), (HIGH + LOW) / 2, atol=0.05)


def test_twin_critics_are_two_separate_mlps() -> None:
    torch.manual_seed(0)
    critics = TwinQ(3, 2, (8, 8))
    obs, action = torch.randn(5, 3), torch.randn(5, 2)
    both = critics(obs, action)
    assert both.shape == (2, 5)
    for j in (0, 1):
        torch.testing.assert_close(both[j], critics.critic(j, obs, action))
    assert not torch.allclose(both[0], both[1])  # initialised apart
    for w in critics.weights:  # nn.Linear's bound, 1 / sqrt(fan_in)
        assert w.abs().max() <= 1 / math.sqrt(w.shape[1])
