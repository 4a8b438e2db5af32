"""Neural networks: MLP bodies, the DQN Q-network, and flat parameter vectors.

Flat parameter vectors are how weights travel: the learner writes them into shared
memory (or `ray.put`s them) once per version; actors copy them into their own CPU
model. A module is never pickled per step.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, activation: type[nn.Module] = nn.ReLU
) -> nn.Sequential:
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), activation()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class QNetwork(nn.Module):
    """Q(s, ·) for a flat observation and a discrete action set."""

    def __init__(self, obs_dim: int, num_actions: int, hidden: Sequence[int] = (256, 256)) -> None:
        super().__init__()
        self.obs_dim, self.num_actions, self.hidden = obs_dim, num_actions, tuple(hidden)
        self.net = mlp(obs_dim, hidden, num_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs.flatten(1).float())

    @torch.no_grad()
    def greedy(self, obs: np.ndarray) -> np.ndarray:
        """Greedy actions for a batch of observations (numpy in, numpy out)."""
        device = next(self.parameters()).device
        q = self(torch.as_tensor(obs, device=device))
        return q.argmax(dim=1).cpu().numpy()


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def params_to_flat(model: nn.Module, out: np.ndarray) -> None:
    """Write all parameters of `model`, in order, into the float32 vector `out`."""
    offset = 0
    for p in model.parameters():
        n = p.numel()
        out[offset : offset + n] = p.detach().reshape(-1).cpu().numpy()
        offset += n


@torch.no_grad()
def flat_to_params(flat: np.ndarray, model: nn.Module) -> None:
    """Load the float32 vector `flat` (as written by `params_to_flat`) into `model`."""
    offset = 0
    for p in model.parameters():
        n = p.numel()
        p.copy_(torch.from_numpy(flat[offset : offset + n]).view_as(p))
        offset += n
