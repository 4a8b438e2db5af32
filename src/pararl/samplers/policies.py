"""Acting policies for the multi-task sampler: Gaussian actions mean(obs) + std * noise.

The sampler passes the noise in (drawn per env, per step, from the sample seed),
so the policy itself is deterministic. `MLPGaussianPolicy` runs the actor of
`pararl.models.ActorCritic`; BLAS kernels may round a row differently for
different batch sizes, so its actions agree across recv policies to float
rounding. `LinearGaussianPolicy` computes every row on its own with NumPy and is
bit-for-bit independent of the batch (the reference for tests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from pararl.models import ActorCritic

_LOG_2PI = math.log(2 * math.pi)


class NoisePolicy(Protocol):
    action_dim: int

    def act(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions [B, action_dim] and their log-probabilities [B] for `obs` [B, ...]."""


def gaussian_log_prob(noise: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """log N(mean + std * noise; mean, std), summed over action dimensions."""
    return -(0.5 * np.square(noise) + log_std + 0.5 * _LOG_2PI).sum(axis=-1)


class MLPGaussianPolicy:
    """The actor MLP of an `ActorCritic` (tanh, hidden widths `hidden`) as a policy.

    With worker processes on every core, run torch with one intra-op thread
    (`torch.set_num_threads(1)`, as the `partial` benchmark does): spinning
    OpenMP threads fight the workers for cores and slow every forward pass.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int] = (64, 64),
        log_std: float = -0.5,
        seed: int = 0,
    ) -> None:
        torch.manual_seed(seed)
        self.model = ActorCritic(obs_dim, action_dim, discrete=False, hidden=hidden)
        with torch.no_grad():
            self.model.log_std.fill_(log_std)
        self.model.eval()
        self.action_dim = action_dim
        self.hidden = tuple(hidden)

    @torch.no_grad()
    def act(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean = self.model.actor(torch.from_numpy(np.asarray(obs, np.float32))).numpy()
        log_std = self.model.log_std.numpy()
        actions = (mean + np.exp(log_std) * noise).astype(np.float32)
        return actions, gaussian_log_prob(noise, log_std).astype(np.float32)


class LinearGaussianPolicy:
    """mean = obs @ W + b, every row computed alone (batch-independent results)."""

    def __init__(self, obs_dim: int, action_dim: int, log_std: float = -0.5, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.weight = rng.normal(scale=1.0 / math.sqrt(obs_dim), size=(obs_dim, action_dim))
        self.bias = np.zeros(action_dim)
        self.log_std = np.full(action_dim, log_std)
        self.action_dim = action_dim

    def act(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = np.asarray(obs, np.float64).reshape(len(obs), -1)
        # Elementwise product and a sum over one axis: the same operations, in the
        # same order, for a row whatever the batch (no BLAS blocking).
        mean = (flat[:, :, None] * self.weight[None]).sum(axis=1) + self.bias
        actions = (mean + np.exp(self.log_std) * noise).astype(np.float32)
        return actions, gaussian_log_prob(noise, self.log_std).astype(np.float32)
