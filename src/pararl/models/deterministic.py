"""TD3's actor: a deterministic policy squashed into the env's bounds, whose
`sampled` actions are its exploration (Gaussian noise, clipped to the bounds)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from pararl.models.acting import Acted, Draws, FeedForward, Mode, State, no_mask, uniform_within
from pararl.models.networks import mlp


class DeterministicActor(FeedForward, nn.Module):
    """pi(s) = scale * tanh(MLP(s)) + bias: a ReLU MLP squashed into the env's bounds.
    Its `sampled` actions are TD3's exploration: pi(s) plus Gaussian noise of standard
    deviation `noise * scale`, clipped to the bounds."""

    low: torch.Tensor
    high: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int],
        low: np.ndarray,
        high: np.ndarray,
        noise: float = 0.1,
    ) -> None:
        super().__init__()
        self.obs_dim, self.action_dim, self.hidden = obs_dim, action_dim, tuple(hidden)
        self.noise = noise
        self.body = mlp(obs_dim, hidden, action_dim)
        self.register_buffer("low", torch.as_tensor(np.asarray(low, np.float32)))
        self.register_buffer("high", torch.as_tensor(np.asarray(high, np.float32)))
        self.register_buffer("scale", (self.high - self.low) / 2)
        self.register_buffer("bias", (self.high + self.low) / 2)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.scale * torch.tanh(self.body(obs.flatten(1).float())) + self.bias

    @torch.no_grad()
    def act(
        self,
        obs: np.ndarray,
        state: State,
        first: np.ndarray,
        mode: Mode,
        draws: Draws,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """The policy protocol (`models.acting`): pi(s), or pi(s) plus exploration
        noise drawn from `draws.rng`, within the bounds."""
        del first
        no_mask(mask, "TD3's actor")
        action = self(torch.as_tensor(np.asarray(obs, np.float32), device=self.scale.device))
        action = action.cpu().numpy()
        if mode == "sampled":
            scale = self.scale.cpu().numpy()
            action = action + self.noise * scale * draws.numpy.standard_normal(action.shape)
            action = np.clip(action, self.low.cpu().numpy(), self.high.cpu().numpy())
        return Acted(action.astype(np.float32), state)

    def uniform(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """`count` actions drawn uniformly within the bounds (the first env steps)."""
        return uniform_within(self.scale, self.bias, count, rng)


def make_actor(
    obs_dim: int,
    action_dim: int,
    hidden: Sequence[int],
    low: np.ndarray,
    high: np.ndarray,
    noise: float,
) -> DeterministicActor:
    """The actor constructor actors and evaluations call (picklable by `functools.partial`)."""
    return DeterministicActor(obs_dim, action_dim, hidden, low, high, noise)


__all__ = ["DeterministicActor", "make_actor"]
