"""SAC's policy: a Gaussian squashed by tanh and scaled to the env's action bounds.

    x = mu(s) + sigma(s) * eps,  eps ~ N(0, I)
    a = scale * tanh(x) + bias,  scale = (high - low) / 2,  bias = (high + low) / 2

The log-density of `a` is the Gaussian's of `x` less the log of the map's Jacobian,
sum_i log(scale_i * (1 - tanh(x_i)^2)) (Haarnoja et al. 2018, appendix C). The
derivative of tanh is taken as 2 (log 2 - x - softplus(-2x)), the same number written
so that it stays finite where tanh(x) rounds to +-1 (SB3 and CleanRL add 1e-6 inside
the log instead, which biases it where the policy is nearly deterministic).

The noise is an argument, never drawn here: the learner draws it outside its fused
step (`algos.fused`), actors draw it from their own seeded streams.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from pararl.models.acting import (
    Acted,
    Draws,
    FeedForward,
    Mode,
    Observations,
    State,
    no_mask,
    obs_tensor,
    uniform_within,
)
from pararl.models.gaussian import gaussian_log_prob
from pararl.models.multi import MultiInputEncoder
from pararl.models.networks import Encoder, mlp
from pararl.observations import Leaf, batch_size

# SB3's bounds on the log standard deviation (its SAC actor clamps to these)
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
_LOG_2 = math.log(2.0)


def squash_log_det(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """log |da/dx| of a = scale * tanh(x) + bias, summed over the action dimensions."""
    log_dtanh = 2.0 * (_LOG_2 - x - F.softplus(-2.0 * x))  # log(1 - tanh(x)^2)
    return (log_dtanh + torch.log(scale)).sum(-1)


class SquashedGaussianActor(FeedForward, nn.Module):
    """pi(a|s) for a Box action space with finite bounds `low`, `high`: an MLP (ReLU
    hidden layers, SB3's and CleanRL's SAC actor) gives the mean and the log standard
    deviation of x, whose tanh is scaled to the bounds. Given an `encoder` (Dict and
    Tuple observations: `models.multi`), the MLP reads its features (`obs_dim` is
    then unused); the actor's encoder is its own, as SB3's SAC keeps its actor's
    features apart from the critics'."""

    scale: torch.Tensor  # buffers: they travel with the weights
    bias: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int],
        low: np.ndarray,
        high: np.ndarray,
        encoder: Encoder | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        if encoder is not None:
            obs_dim = encoder.features
        self.obs_dim, self.action_dim, self.hidden = obs_dim, action_dim, tuple(hidden)
        # the hidden layers, then one linear layer for the mean and the log-std together
        self.body = nn.Sequential(mlp(obs_dim, hidden[:-1], hidden[-1]), nn.ReLU())
        self.head = nn.Linear(hidden[-1], 2 * action_dim)
        low_t = torch.as_tensor(np.asarray(low, np.float32).reshape(action_dim))
        high_t = torch.as_tensor(np.asarray(high, np.float32).reshape(action_dim))
        self.register_buffer("scale", (high_t - low_t) / 2)
        self.register_buffer("bias", (high_t + low_t) / 2)

    def forward(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean and the clamped log standard deviation of x, [B, A] each."""
        x = self.encoder(obs) if self.encoder is not None else obs.flatten(1).float()
        mean, log_std = self.head(self.body(x)).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: Any, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised actions a = scale * tanh(mean + std * noise) + bias and their
        log-densities log pi(a|s) (differentiable in the parameters)."""
        mean, log_std = self(obs)
        x = mean + log_std.exp() * noise
        action = self.scale * torch.tanh(x) + self.bias
        log_prob = gaussian_log_prob(noise, log_std) - squash_log_det(x, self.scale)
        return action, log_prob

    @torch.no_grad()
    def with_noise(self, obs: Observations, noise: np.ndarray) -> np.ndarray:
        """Sampled actions (numpy in, numpy out), `noise` ~ N(0, I) [B, A]."""
        device = self.scale.device
        action, _ = self.sample(obs_tensor(obs, device), torch.as_tensor(noise, device=device))
        return action.cpu().numpy()

    @torch.no_grad()
    def greedy(self, obs: Observations) -> np.ndarray:
        """The deterministic actions scale * tanh(mean) + bias (evaluation)."""
        mean, _ = self(obs_tensor(obs, self.scale.device))
        return (self.scale * torch.tanh(mean) + self.bias).cpu().numpy()

    def act(
        self,
        obs: Observations,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """The policy protocol (`models.acting`): the deterministic action, or a
        sample with its noise drawn from `draws.rng` (numpy's stream)."""
        del first
        no_mask(mask, "SAC's actor")
        if self.encoder is None:
            obs = np.asarray(obs, np.float32)
        if mode == "greedy":
            return Acted(self.greedy(obs), state)
        noise = draws.numpy.standard_normal((batch_size(obs), self.action_dim), dtype=np.float32)
        return Acted(self.with_noise(obs, noise), state)

    @torch.no_grad()
    def uniform(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` actions drawn uniformly within the bounds (SAC's first steps)."""
        return uniform_within(self.scale, self.bias, count, rng)


def squashed_actor(
    obs_dim: int,
    action_dim: int,
    hidden: Sequence[int],
    low: np.ndarray,
    high: np.ndarray,
    leaves: Sequence[Leaf] = (),
) -> SquashedGaussianActor:
    """The constructor actors, the evaluation child and `pararl evaluate` call
    (picklable through `functools.partial`); `leaves`: Dict and Tuple observations,
    read by a multi-input encoder of the actor's own."""
    encoder = MultiInputEncoder(leaves) if leaves else None
    return SquashedGaussianActor(obs_dim, action_dim, hidden, low, high, encoder)


__all__ = [
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "SquashedGaussianActor",
    "squash_log_det",
    "squashed_actor",
]
