"""Observation normalisation and reward scaling whose statistics travel with the policy.

The statistics are running moments (count, mean, variance) over *every* env's
data: they are updated once per rollout, after the update, from the rollout's raw
observations and per-env discounted returns, and they are frozen while a rollout
is collected and learned from. So the policy that acted is the policy that is
differentiated (the first ratio is exactly 1), and the statistics depend only on the
data — not on how many workers stepped it, in which order partial receives brought
it back, or on which Ray node an actor ran. They live in the model as buffers, so
checkpoints, `--resume`, evaluation, `--video` and Ray actors get them with the
weights, with no second channel.

Reward scaling divides by the standard deviation of the discounted return (not of
the reward), as Gymnasium's `NormalizeReward`, SB3's `VecNormalize` and CleanRL do.
Moments are merged with the parallel algorithm of Chan, Golub and LeVeque (1979).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

EPS = 1e-8


@dataclass(frozen=True)
class NormSettings:
    """What is normalised, and the clip ranges after normalising."""

    obs: bool = False
    reward: bool = False
    clip_obs: float = 10.0
    clip_reward: float = 10.0


OFF = NormSettings()  # nothing normalised


def merge_moments(
    count: float, mean: np.ndarray, var: np.ndarray, batch: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Running (count, mean, population variance) merged with a batch [N, ...]."""
    n = batch.shape[0]
    if n == 0:
        return count, mean, var
    batch = batch.astype(np.float64, copy=False)
    b_mean, b_var = batch.mean(axis=0), batch.var(axis=0)
    total = count + n
    delta = b_mean - mean
    new_mean = mean + delta * (n / total)
    m2 = var * count + b_var * n + np.square(delta) * (count * n / total)
    return total, new_mean, m2 / total


class Normalizer(nn.Module):
    """Buffers: the moments of observations and of discounted returns (float64) and
    what is applied (float32: the shift and scale of observations, the reward
    scale). With nothing seen yet it is the identity."""

    obs_count: torch.Tensor
    obs_mean: torch.Tensor
    obs_var: torch.Tensor
    ret_count: torch.Tensor
    ret_mean: torch.Tensor
    ret_var: torch.Tensor
    obs_shift: torch.Tensor
    obs_scale: torch.Tensor
    reward_scale: torch.Tensor

    def __init__(self, obs_dim: int, settings: NormSettings = OFF) -> None:
        super().__init__()
        self.settings = settings
        f64 = torch.float64
        self.register_buffer("obs_count", torch.zeros((), dtype=f64))
        self.register_buffer("obs_mean", torch.zeros(obs_dim, dtype=f64))
        self.register_buffer("obs_var", torch.ones(obs_dim, dtype=f64))
        self.register_buffer("ret_count", torch.zeros((), dtype=f64))
        self.register_buffer("ret_mean", torch.zeros((), dtype=f64))
        self.register_buffer("ret_var", torch.ones((), dtype=f64))
        self.register_buffer("obs_shift", torch.zeros(obs_dim))
        self.register_buffer("obs_scale", torch.ones(obs_dim))
        self.register_buffer("reward_scale", torch.ones(()))

    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        """The network's input: flattened float observations, normalised and clipped
        when observation normalisation is on."""
        x = obs.flatten(1).float()
        if not self.settings.obs:
            return x
        clip = self.settings.clip_obs
        return ((x - self.obs_shift) * self.obs_scale).clamp_(-clip, clip)

    def scale_rewards(self, rewards: np.ndarray) -> np.ndarray:
        """Rewards as learned from: scaled and clipped when reward scaling is on."""
        if not self.settings.reward:
            return rewards
        clip = self.settings.clip_reward
        return np.clip(rewards * float(self.reward_scale), -clip, clip)

    @torch.no_grad()
    def update(self, obs: np.ndarray, discounted_returns: np.ndarray) -> None:
        """Merge one rollout's raw observations [N, ...] and discounted returns [N]."""
        if self.settings.obs:
            flat = obs.reshape(obs.shape[0], -1)
            count, mean, var = merge_moments(*self._moments("obs"), flat)
            self._store("obs", count, mean, var)
            self.obs_shift.copy_(self.obs_mean)
            self.obs_scale.copy_((self.obs_var + EPS).rsqrt())
        if self.settings.reward:
            count, mean, var = merge_moments(*self._moments("ret"), discounted_returns)
            self._store("ret", count, mean, var)
            self.reward_scale.copy_((self.ret_var + EPS).rsqrt())

    def _moments(self, name: str) -> tuple[float, np.ndarray, np.ndarray]:
        count, mean, var = (getattr(self, f"{name}_{k}") for k in ("count", "mean", "var"))
        return float(count), mean.cpu().numpy(), var.cpu().numpy()

    def _store(self, name: str, count: float, mean: np.ndarray, var: np.ndarray) -> None:
        getattr(self, f"{name}_count").fill_(count)
        getattr(self, f"{name}_mean").copy_(torch.as_tensor(mean))
        getattr(self, f"{name}_var").copy_(torch.as_tensor(var))

    def stats(self) -> dict[str, float]:
        """For the metrics: the mean standard deviation of observations and the reward
        scale, where they apply."""
        out: dict[str, float] = {}
        if self.settings.obs:
            out["obs_std"] = float(self.obs_var.sqrt().mean())
        if self.settings.reward:
            out["reward_scale"] = float(self.reward_scale)
        return out


class DiscountedReturns:
    """Each env's running discounted return, the statistic reward scaling is based on;
    kept by whoever steps the envs, reset where an episode ends."""

    def __init__(self, num_envs: int, gamma: float | np.ndarray) -> None:
        self.gamma = gamma
        self.value = np.zeros(num_envs)

    def step(self, ids: np.ndarray, rewards: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """The discounted returns of envs `ids` including this step's rewards."""
        now = self.value[ids] * self.gamma + rewards
        self.value[ids] = np.where(ended, 0.0, now)
        return now


__all__ = ["OFF", "DiscountedReturns", "NormSettings", "Normalizer", "merge_moments"]
