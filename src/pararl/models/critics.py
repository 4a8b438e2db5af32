"""Action-value critics for continuous actions: SAC's twin Q(s, a) networks.

The two critics are separate MLPs (their own weights, their own initialisation, as
in SB3 and CleanRL), stored as one: each layer's weights are stacked along a first
axis of size 2, so both critics run in one batched matrix product per layer instead
of two calls each (the same arithmetic; a SAC update runs the critics four times).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from pararl.models.networks import Encoder


class TwinQ(nn.Module):
    """Q_1(s, a) and Q_2(s, a): MLPs on the concatenated observation and action with
    ReLU hidden layers, each initialised as `nn.Linear` initialises a layer. Given an
    `encoder` (Dict and Tuple observations: `models.multi`), the MLPs read its
    features in place of the observation (`obs_dim` is then unused): one encoder,
    shared by the critics (as SB3's SAC critic shares its features extractor)."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int],
        critics: int = 2,
        encoder: Encoder | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        if encoder is not None:
            obs_dim = encoder.features
        self.obs_dim, self.action_dim, self.hidden = obs_dim, action_dim, tuple(hidden)
        self.critics = critics
        dims = [obs_dim + action_dim, *hidden, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in itertools.pairwise(dims):
            bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's: kaiming_uniform(a=sqrt 5), bias alike
            self.weights.append(nn.Parameter(torch.empty(critics, fan_in, fan_out)))
            self.biases.append(nn.Parameter(torch.empty(critics, 1, fan_out)))
            nn.init.uniform_(self.weights[-1], -bound, bound)
            nn.init.uniform_(self.biases[-1], -bound, bound)

    def _read(self, obs: Any) -> torch.Tensor:
        return self.encoder(obs) if self.encoder is not None else obs.flatten(1).float()

    def forward(self, obs: Any, action: torch.Tensor) -> torch.Tensor:
        """Every critic's value of each (s, a): [critics, B]."""
        x = torch.cat([self._read(obs), action], dim=-1)
        h = x.unsqueeze(0).expand(self.critics, *x.shape)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(b, h, w)
            if i < last:
                h = torch.relu(h)
        return h.squeeze(-1)

    def critic(self, index: int, obs: Any, action: torch.Tensor) -> torch.Tensor:
        """Critic `index` alone, as a plain MLP would compute it: [B] (TD3's actor loss: Q_1)."""
        h = torch.cat([self._read(obs), action], dim=-1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w[index] + b[index, 0]
            if i < last:
                h = torch.relu(h)
        return h.squeeze(-1)


__all__ = ["TwinQ"]
