"""How actors choose actions: the one interface every off-policy actor acts through
(`ActingPolicy`), wherever the acting happens (in this process, in actor processes,
in Ray actors), and its two kinds:

- `EpsilonGreedy` (DQN): the greedy action of a Q-network copy, replaced by a uniform
  one with probability epsilon (a linear schedule over the run's env steps, or an
  Ape-X actor's own constant); Ape-X actors also give each transition its first
  priority under their Q copy;
- `SquashedSampling` (SAC): uniform random actions within the bounds for the run's
  first env steps, then a sample of the actor copy's tanh-squashed Gaussian.

A policy is a small picklable record: it travels to actor processes and Ray actors,
which build their own network with `make_net` and load the weights shipped to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
from torch import nn

from pararl.models import QNetwork, SquashedGaussianActor

# (Q copy, obs, action, ret, next_obs, discount) -> each transition's first priority
PriorityFn = Callable[
    [nn.Module, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], np.ndarray
]


class ActingPolicy(Protocol):
    """How an actor acts with its copy of the learner's acting network."""

    @property
    def action_shape(self) -> tuple[int, ...]:
        """One action's shape: () for an index, (A,) for a continuous vector."""

    @property
    def action_dtype(self) -> np.dtype:
        """The actions' dtype, as the replay memory stores them."""

    @property
    def priorities(self) -> PriorityFn | None:
        """Each transition's first priority from the actor (Ape-X), or None."""

    def make_net(self) -> nn.Module:
        """A new acting network (the actor's own copy; weights are loaded into it)."""

    def act(
        self, net: nn.Module, obs: np.ndarray, env_steps: int, rng: np.random.Generator
    ) -> np.ndarray:
        """Actions for the batch `obs`, at the run's `env_steps`, drawing from `rng`."""


@dataclass(frozen=True)
class EpsilonSchedule:
    """Linear from `start` to `end` over `decay_steps` env steps of the whole run;
    or a constant `fixed` epsilon (an Ape-X actor's own)."""

    start: float
    end: float
    decay_steps: int
    fixed: float | None = None

    def __call__(self, env_steps: int) -> float:
        if self.fixed is not None:
            return self.fixed
        frac = min(1.0, env_steps / self.decay_steps)
        return self.start + frac * (self.end - self.start)

    def for_actor(self, index: int, num_actors: int) -> EpsilonSchedule:
        """Ape-X's per-actor constant: eps_i = 0.4 ** (1 + 7 i / (N - 1))
        (Horgan et al. 2018)."""
        eps = 0.4 ** (1 + 7 * index / max(1, num_actors - 1))
        return EpsilonSchedule(self.start, self.end, self.decay_steps, eps)


def epsilon_greedy(
    q: QNetwork, obs: np.ndarray, eps: float, rng: np.random.Generator
) -> np.ndarray:
    """Greedy actions of `q`, each replaced by a uniform one with probability `eps`."""
    actions = q.greedy(obs)
    explore = rng.random(len(actions)) < eps
    actions[explore] = rng.integers(0, q.num_actions, size=int(explore.sum()))
    return actions


@torch.no_grad()
def initial_priorities(
    q: nn.Module,
    obs: np.ndarray,
    action: np.ndarray,
    ret: np.ndarray,
    next_obs: np.ndarray,
    discount: np.ndarray,
) -> np.ndarray:
    """Ape-X's actor-side priorities: each transition's n-step TD error under the
    actor's own Q copy, |G + gamma^n max_a Q(s', a) - Q(s, a)|."""
    if len(action) == 0:
        return np.zeros(0, np.float32)
    q_obs = q(torch.as_tensor(obs)).gather(1, torch.as_tensor(action).view(-1, 1)).squeeze(1)
    next_value = q(torch.as_tensor(next_obs)).max(dim=1).values
    target = (
        torch.as_tensor(ret, dtype=torch.float32)
        + torch.as_tensor(discount, dtype=torch.float32) * next_value
    )
    return (target - q_obs).abs().numpy().astype(np.float32)


@dataclass(frozen=True)
class EpsilonGreedy:
    """DQN's acting: epsilon-greedy on a Q-network copy; `apex`: also the first
    priorities of its transitions."""

    make_q: Callable[[], QNetwork]  # the run's Q-network constructor (picklable)
    schedule: EpsilonSchedule  # of the run's env steps
    apex: bool = False

    @property
    def action_shape(self) -> tuple[int, ...]:
        return ()

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.int64)

    @property
    def priorities(self) -> PriorityFn | None:
        return initial_priorities if self.apex else None

    def make_net(self) -> nn.Module:
        return self.make_q()

    def act(
        self, net: nn.Module, obs: np.ndarray, env_steps: int, rng: np.random.Generator
    ) -> np.ndarray:
        assert isinstance(net, QNetwork)
        return epsilon_greedy(net, obs, self.schedule(env_steps), rng)


@dataclass(frozen=True)
class SquashedSampling:
    """SAC's acting: uniform random actions within the bounds while the run has taken
    fewer than `random_steps` env steps (the learner's `learning_starts`, as SB3 does),
    then a ~ pi(.|s) of the actor copy, its noise drawn from the actor's stream."""

    make_actor: Callable[[], SquashedGaussianActor]  # the run's actor constructor
    action_dim: int
    random_steps: int

    @property
    def action_shape(self) -> tuple[int, ...]:
        return (self.action_dim,)

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def priorities(self) -> PriorityFn | None:
        return None  # new transitions get the memory's largest priority

    def make_net(self) -> nn.Module:
        return self.make_actor()

    def act(
        self, net: nn.Module, obs: np.ndarray, env_steps: int, rng: np.random.Generator
    ) -> np.ndarray:
        assert isinstance(net, SquashedGaussianActor)
        if env_steps < self.random_steps:
            return net.uniform(len(obs), rng)
        noise = rng.standard_normal((len(obs), self.action_dim), dtype=np.float32)
        return net.act(np.asarray(obs, np.float32), noise)


__all__ = [
    "ActingPolicy",
    "EpsilonGreedy",
    "EpsilonSchedule",
    "PriorityFn",
    "SquashedSampling",
    "epsilon_greedy",
    "initial_priorities",
]
