"""GAE(lambda), the one advantage estimator (Schulman et al. 2016): PPO's rollouts
(numpy, `samplers.rollout.collect`) and MAML's padded episodes (torch,
`algos.baseline`) both call `gae`, each after saying what a step bootstraps from.

    delta_t = r_t + gamma V'_t - V_t
    A_t     = delta_t + gamma lambda A_{t+1},   with no A_{t+1} where an episode ends at t

`V'_t` is the value step t bootstraps from: the next state's, a truncated episode's
last observation's, or 0 after termination. It is the caller's to give, because
that is where the two uses differ.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

Array = TypeVar("Array", np.ndarray, torch.Tensor)


def gae(
    rewards: Array,
    values: Array,
    next_values: Array,
    ends: Array,
    gamma: float | np.ndarray,
    lam: float | np.ndarray,
) -> Array:
    """Advantages [T, ...] (time first) of numpy arrays or torch tensors; `ends[t]`:
    an episode ended at step t (nothing carried back into it). `gamma` and `lam`: one
    number, or (numpy) one per env, the last axis. See the module."""
    xp = torch if isinstance(rewards, torch.Tensor) else np
    # one-step TD errors, then their (gamma lambda)-discounted sums backwards in time
    deltas = rewards + gamma * next_values - values
    advantages = xp.zeros_like(deltas)
    running = xp.zeros_like(deltas[0])
    for t in range(len(deltas) - 1, -1, -1):
        running = deltas[t] + gamma * lam * xp.where(ends[t], 0.0, running)
        advantages[t] = running
    return advantages


__all__ = ["gae"]
