"""Episodes of many tasks as tensors, with MAML's advantages.

The advantages are those of MAML's reinforcement-learning experiments (Finn et al.
2017, following Duan et al. 2016): a linear baseline fitted per task by ridge
regression on hand-made features of the observation and the time step
(pytorch-maml-rl's `LinearFeatureBaseline`: obs, obs^2, t, t^2, t^3, 1), then
GAE (lambda 1.0 in the reference: the discounted return minus the baseline),
normalised per task over the real steps. Fixed-length episodes: steps after an
early termination are padding (`mask` 0) and count nowhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from pararl.gae import gae


class EpisodeArrays(Protocol):
    """What this module reads of one task's episodes, arrays [episodes, steps, ...]
    (the meta sampler's `TaskEpisodes` is one)."""

    @property
    def observations(self) -> np.ndarray: ...
    @property
    def actions(self) -> np.ndarray: ...
    @property
    def rewards(self) -> np.ndarray: ...
    @property
    def mask(self) -> np.ndarray: ...  # True for real steps, False for padding
    @property
    def returns(self) -> np.ndarray: ...  # undiscounted return of every episode


@dataclass(frozen=True)
class TaskBatch:
    """Episodes of every task, stacked: [tasks, episodes, steps, ...]."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    mask: torch.Tensor  # 1.0 for real steps, 0.0 for padding
    advantages: torch.Tensor
    returns: np.ndarray  # undiscounted return of every episode [tasks, episodes]

    @property
    def num_tasks(self) -> int:
        return int(self.obs.shape[0])

    def tasks(self, which: slice) -> TaskBatch:
        """The episodes of the tasks `which` selects (views, not copies)."""
        return TaskBatch(
            self.obs[which],
            self.actions[which],
            self.rewards[which],
            self.mask[which],
            self.advantages[which],
            self.returns[which],
        )


def task_batch(
    episodes: Sequence[EpisodeArrays], gamma: float, gae_lambda: float, device: torch.device
) -> TaskBatch:
    """The tensors of `episodes` (one entry per task) with their advantages."""

    def stack(name: str) -> torch.Tensor:
        array = np.stack([getattr(e, name) for e in episodes]).astype(np.float32)
        return torch.from_numpy(array).to(device)

    obs, rewards, mask = stack("observations"), stack("rewards"), stack("mask")
    values = LinearFeatureBaseline.fit_predict(obs, rewards, mask, gamma)
    advantages = normalized(padded_gae(rewards, values, mask, gamma, gae_lambda), mask)
    returns = np.stack([e.returns for e in episodes])
    return TaskBatch(obs, stack("actions"), rewards, mask, advantages, returns)


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + gamma G_{t+1} within each episode (last axis: time)."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = (rewards[..., t] + gamma * running) * mask[..., t]
        returns[..., t] = running
    return returns


def padded_gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """GAE(lambda) (`pararl.gae`) of fixed-length episodes, time on the last axis, with
    no bootstrap past an episode's last real step (as the reference computes it);
    padding steps (`mask` 0) get 0."""
    values = values * mask
    next_values = torch.cat([values[..., 1:], torch.zeros_like(values[..., :1])], dim=-1)
    # an episode ends at its last real step: the next step is padding, or there is none
    ends = torch.cat([mask[..., 1:], torch.zeros_like(mask[..., :1])], dim=-1) == 0
    r, v, v_next, end = (x.movedim(-1, 0) for x in (rewards * mask, values, next_values, ends))
    return gae(r, v, v_next, end, gamma, lam).movedim(0, -1)


def normalized(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std per task (axis 0) over the real steps; padding stays 0."""
    dims = tuple(range(1, x.dim()))
    count = mask.sum(dims, keepdim=True).clamp(min=1)
    mean = (x * mask).sum(dims, keepdim=True) / count
    var = ((x - mean).square() * mask).sum(dims, keepdim=True) / count
    return (x - mean) / (var.sqrt() + eps) * mask


class LinearFeatureBaseline:
    """Per task: value(s_t) = features(s_t, t) . w, w by ridge regression on the
    discounted returns (regularisation raised tenfold while the solve fails)."""

    reg_coeff = 1e-5

    @staticmethod
    def features(obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """[..., steps, 2 D + 4]: obs, obs^2, t, t^2, t^3, 1 (t: step / 100), 0 on padding."""
        o = obs.clamp(-10, 10)
        t = (torch.cumsum(mask, dim=-1) * mask / 100.0).unsqueeze(-1)
        ones = mask.unsqueeze(-1)
        return torch.cat([o, o.square(), t, t.square(), t**3, ones], dim=-1) * ones

    @classmethod
    def fit_predict(
        cls, obs: torch.Tensor, rewards: torch.Tensor, mask: torch.Tensor, gamma: float
    ) -> torch.Tensor:
        """The fitted values of every step [tasks, episodes, steps], one fit per task."""
        x = cls.features(obs, mask)
        tasks, dim = x.shape[0], x.shape[-1]
        flat = x.reshape(tasks, -1, dim).double()
        y = discounted_returns(rewards, mask, gamma).reshape(tasks, -1, 1).double()
        # normal equations (X^T X + reg I) w = X^T y, batched over tasks
        xtx, xty = flat.transpose(1, 2) @ flat, flat.transpose(1, 2) @ y
        eye = torch.eye(dim, dtype=xtx.dtype, device=xtx.device)
        reg = cls.reg_coeff
        for _ in range(5):
            w, info = torch.linalg.solve_ex(xtx + reg * eye, xty)
            if bool((info == 0).all()) and bool(torch.isfinite(w).all()):
                break
            reg *= 10
        else:
            w = torch.zeros_like(xty)  # no fit: a zero baseline
        return (flat @ w).reshape(mask.shape).float()


__all__ = [
    "LinearFeatureBaseline",
    "TaskBatch",
    "discounted_returns",
    "normalized",
    "padded_gae",
    "task_batch",
]
