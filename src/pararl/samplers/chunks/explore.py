"""How off-policy actors choose actions: the one interface every actor acts through
(`ActingPolicy`), wherever the acting happens (in this process, in actor processes,
in Ray actors). Each algorithm gives its own, beside its maths (`algos.dqn`'s
epsilon-greedy, `algos.sac`'s squashed sampling, `algos.td3`'s Gaussian noise).

A policy is a small picklable record: it travels to actor processes and Ray actors,
which build their own network with `make_net` and load the weights shipped to them.
Each acts through the network's one acting call (`models.acting`), sampled, from the
actor's own stream; the sampler carries the network's state and episode starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
from torch import nn

from pararl.models.acting import Acted, State

# (Q copy, obs, action, ret, next_obs, discount, next_mask) -> each transition's first
# priority (`next_mask`: the next observations' action masks, or None); observations:
# an array, or a dict of leaves (Dict and Tuple observations)
PriorityFn = Callable[
    [nn.Module, Any, np.ndarray, np.ndarray, Any, np.ndarray, np.ndarray | None],
    np.ndarray,
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
        self,
        net: nn.Module,
        obs: Any,
        state: State,
        first: np.ndarray,
        env_steps: int,
        rng: np.random.Generator,
        mask: np.ndarray | None = None,
    ) -> Acted:
        """Actions for the batch `obs` (and the network's next `state`; `first`: the
        envs whose episodes start with `obs`), at the run's `env_steps`, drawing from
        `rng`; within `mask`, the observations' action masks (`envs.masks`), if any."""


__all__ = ["ActingPolicy", "PriorityFn"]
