"""Gaussian policies: MAML's meta-policy network, and the policies that act for
the multi-task sampler, which passes each row's noise in.

The log-density of a diagonal Gaussian is written once (`gaussian_log_prob`, on the
standardised sample, numpy or torch alike) for every one of them.

`GaussianMLP` is the policy of MAML's reinforcement-learning experiments (Finn et
al. 2017; pytorch-maml-rl's `NormalMLPPolicy`): a tanh MLP gives the mean, a free
parameter the log standard deviation. It runs on parameters given to it: one set
through `torch.func.functional_call`, or a set per task stacked along a first axis
through `forward_tasks`, so the same module runs the meta-parameters or any task's
adapted parameters.

The multi-task sampler's policies (`NoisePolicy`) give actions mean(obs) + std *
noise through `with_noise`: the sampler passes the noise in (drawn per env, per step,
from the sample seed), so a policy itself is deterministic. (This is the sampler's own
call, batched by task; `GaussianMLP.act` is the acting call every policy has,
`models.acting`.) `MLPGaussianPolicy` runs the actor of an `ActorCritic`;
BLAS kernels may round a row differently for different batch sizes, so its actions
agree across recv policies to float rounding. `LinearGaussianPolicy` computes every
row on its own with NumPy and is bit-for-bit independent of the batch (the
reference for tests). `TaskPolicy` is MAML's (`NoisePolicy` plus `act_tasks`):
with no task parameters set, every env acts with the module's own parameters;
after `set_task_params`, each row acts with the parameters of the task its env
runs. Rows are grouped by task into a padded [tasks, rows, obs]
batch and `GaussianMLP.forward_tasks` runs every task's network on its own rows
(a batched matrix product per layer; no parameters copied per row).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol, TypeVar

import numpy as np
import torch
from torch import nn

from pararl.models.acting import Acted, Draws, FeedForward, Mode, State, device_of, no_mask
from pararl.models.networks import ActorCritic, mlp
from pararl.models.tanh import Tanh

Params = dict[str, torch.Tensor]
Array = TypeVar("Array", np.ndarray, torch.Tensor)
_LOG_2PI = math.log(2 * math.pi)


def gaussian_log_prob(z: Array, log_std: Array) -> Array:
    """log N(mean + std z; mean, std) for the standardised sample `z`, summed over
    the action dimensions (the last axis); numpy arrays or torch tensors."""
    return -(0.5 * z**2 + log_std + 0.5 * _LOG_2PI).sum(-1)


def gaussian_log_likelihood(
    actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor
) -> torch.Tensor:
    """log N(actions; mean, exp(log_std)), summed over the action dimensions."""
    return gaussian_log_prob((actions - mean) * torch.exp(-log_std), log_std)


class GaussianMLP(FeedForward, nn.Module):
    """mean = MLP(obs) (tanh hidden layers), std = exp(log_std), state-independent.

    Weights Xavier-uniform, biases zero, initial std `init_std` (1.0 in MAML's
    experiments); the log-std is clamped below at log(`min_std`).
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int] = (64, 64),
        init_std: float = 1.0,
        min_std: float = 1e-6,
    ) -> None:
        super().__init__()
        self.obs_dim, self.action_dim, self.hidden = obs_dim, action_dim, tuple(hidden)
        self.body = mlp(obs_dim, hidden, action_dim, Tanh)
        self.log_std = nn.Parameter(torch.full((action_dim,), math.log(init_std)))
        self.min_log_std = math.log(min_std)
        for module in self.body:
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's mean [..., action_dim] and log-std [action_dim]."""
        return self.body(obs), self.log_std.clamp(min=self.min_log_std)

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
        """The policy protocol (`models.acting`): the mean, or mean + std * noise with
        the noise drawn from `draws.rng` (numpy's stream, as the sampler draws it)."""
        del first
        no_mask(mask, "MAML's Gaussian policy")
        mean, log_std = self(torch.as_tensor(np.asarray(obs, np.float32), device=device_of(self)))
        mean, std = mean.cpu(), log_std.exp().cpu()
        if mode == "greedy":
            return Acted(mean.numpy(), state)
        noise = draws.numpy.standard_normal(tuple(mean.shape)).astype(np.float32)
        return Acted((mean + std * torch.from_numpy(noise)).numpy(), state)

    def params(self) -> Params:
        """The module's own parameters by name (the meta-parameters)."""
        return dict(self.named_parameters())

    def forward_tasks(
        self, stacked: Params, obs: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each task's network on its own observations: `stacked` holds every parameter
        as [tasks, ...], `obs` is [tasks, ..., obs_dim]. One batched matrix product per
        layer (plain autograd operations, so second derivatives stay cheap); the
        log-std comes back as [tasks, 1, ..., action_dim], broadcastable to the mean."""
        tasks = obs.shape[0]
        x = obs.reshape(tasks, -1, obs.shape[-1])
        for i, layer in enumerate(self.body):
            if isinstance(layer, nn.Linear):
                weight, bias = stacked[f"body.{i}.weight"], stacked[f"body.{i}.bias"]
                x = torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))
            else:
                x = layer(x)
        mean = x.reshape(*obs.shape[:-1], x.shape[-1])
        log_std = stacked["log_std"].clamp(min=self.min_log_std)
        return mean, log_std.reshape(tasks, *[1] * (obs.dim() - 2), -1)


class NoisePolicy(Protocol):
    action_dim: int

    def with_noise(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Actions [B, action_dim] and their log-probabilities [B] for `obs` [B, ...]."""


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
    def with_noise(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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

    def with_noise(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        flat = np.asarray(obs, np.float64).reshape(len(obs), -1)
        # Elementwise product and a sum over one axis: the same operations, in the
        # same order, for a row whatever the batch (no BLAS blocking).
        mean = (flat[:, :, None] * self.weight[None]).sum(axis=1) + self.bias
        actions = (mean + np.exp(self.log_std) * noise).astype(np.float32)
        return actions, gaussian_log_prob(noise, self.log_std).astype(np.float32)


class TaskPolicy:
    """Actions mean + std * noise from the meta-parameters or each task's own."""

    def __init__(self, model: GaussianMLP) -> None:
        self.model = model
        self.action_dim = model.action_dim
        self._stacked: Params | None = None  # [tasks, ...] per parameter

    def set_task_params(self, stacked: Mapping[str, torch.Tensor] | None) -> None:
        """Task j's envs act with the parameters `stacked[name][j]` from now on (None:
        the meta-parameters)."""
        if stacked is None:
            self._stacked = None
            return
        self._stacked = {n: p.detach().to("cpu", torch.float32) for n, p in stacked.items()}

    @property
    def num_task_params(self) -> int:
        """How many tasks have their own parameters (0: all act with the meta-parameters)."""
        return 0 if self._stacked is None else len(next(iter(self._stacked.values())))

    @torch.no_grad()
    def with_noise(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every row with the meta-parameters."""
        mean, log_std = self.model(torch.from_numpy(np.asarray(obs, np.float32)))
        return self._sample(mean.numpy(), log_std.numpy(), noise)

    @torch.no_grad()
    def act_tasks(
        self, obs: np.ndarray, noise: np.ndarray, tasks: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Row i with the parameters of task `tasks[i]` (see the module docstring)."""
        if self._stacked is None:
            return self.with_noise(obs, noise)
        if tasks.max() >= self.num_task_params:
            raise ValueError(
                f"task {int(tasks.max())} has no parameters ({self.num_task_params} set)"
            )
        present, group = np.unique(tasks, return_inverse=True)
        counts = np.bincount(group)
        order = np.argsort(group, kind="stable")
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
        pos = np.empty(len(tasks), np.int64)  # each row's place within its task's group
        pos[order] = np.arange(len(tasks)) - np.repeat(starts, counts)
        x = torch.zeros(len(present), int(counts.max()), obs.shape[-1])
        x[group, pos] = torch.from_numpy(np.asarray(obs, np.float32))
        params = {n: v[torch.from_numpy(present)] for n, v in self._stacked.items()}
        mean, log_std = self.model.forward_tasks(params, x)  # [groups, rows, A], [groups, 1, A]
        return self._sample(mean[group, pos].numpy(), log_std[group, 0].numpy(), noise)

    @staticmethod
    def _sample(
        mean: np.ndarray, log_std: np.ndarray, noise: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        actions = (mean + np.exp(log_std) * noise).astype(np.float32)
        return actions, gaussian_log_prob(noise, log_std).astype(np.float32)


__all__ = [
    "GaussianMLP",
    "LinearGaussianPolicy",
    "MLPGaussianPolicy",
    "NoisePolicy",
    "Params",
    "TaskPolicy",
    "gaussian_log_likelihood",
    "gaussian_log_prob",
]
