"""V-trace (Espeholt et al. 2018, "IMPALA", section 4.1): value targets and policy-gradient
advantages for a rollout acted by a behaviour policy mu that trails the learner's pi,
corrected by truncated importance weights. PPO's asynchronous mode relabels a rollout
with it before the minibatch epochs.

    rho_t   = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)),   c_t = min(c_bar, pi / mu)
    delta_t = rho_t (r_t + gamma V'_t - V_t)
    vs_t    = V_t + delta_t + gamma c_t (vs_{t+1} - V_{t+1}),  no carried term where an
              episode ends at t, and vs_T - V_T = 0 after the last step
    A_t     = rho_t (r_t + gamma vs'_{t+1} - V_t),  vs'_{t+1} = vs_{t+1} while the
              episode goes on, V'_t where it ends at t (and at t = T-1)

`V'_t` is the value step t bootstraps from, as `pararl.gae` takes it: the next state's,
a truncated episode's last observation's, or 0 after termination. `rho_bar` sets the
fixed point (the value of a policy between mu and pi; pi itself when rho_bar is
infinite), `c_bar` how far corrections travel back.

On-policy (log_rhos = 0, rho_bar = c_bar = 1) every rho_t and c_t is 1 and V-trace is
GAE(lambda=1): `vs` is its returns (advantages + values) and `A_t = vs_t - V_t` its
advantages. Off-policy they differ in how the later steps' correction
`vs_{t+1} - V_{t+1}` is weighted: by c_t in `vs_t - V_t`, by rho_t in `A_t`.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

Array = TypeVar("Array", np.ndarray, torch.Tensor)


def vtrace(
    log_rhos: Array,
    rewards: Array,
    values: Array,
    next_values: Array,
    ends: Array,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
) -> tuple[Array, Array]:
    """`(vs, pg_advantages)` [T, ...] (time first) of numpy arrays or torch tensors;
    `log_rhos[t]`: log pi(a_t|x_t) - log mu(a_t|x_t); `ends[t]`: an episode ended at
    step t (nothing carried back across it). See the module."""
    xp = torch if isinstance(rewards, torch.Tensor) else np
    ratios = xp.exp(log_rhos)
    rhos, cs = ratios.clip(max=rho_bar), ratios.clip(max=c_bar)
    # the truncated-IS-weighted TD errors, then their (gamma c)-discounted sums backwards
    deltas = rhos * (rewards + gamma * next_values - values)
    corrections = xp.zeros_like(deltas)  # vs - V
    running = xp.zeros_like(deltas[0])
    for t in range(len(deltas) - 1, -1, -1):
        running = deltas[t] + gamma * cs[t] * xp.where(ends[t], 0.0, running)
        corrections[t] = running
    vs = values + corrections
    # what each step's advantage bootstraps from: vs of the next step while the episode
    # goes on, the step's own bootstrap value where it ended (or the rollout did)
    following = xp.where(ends[:-1], next_values[:-1], vs[1:])
    vs_next = xp.concatenate([following, next_values[-1:]])
    pg_advantages = rhos * (rewards + gamma * vs_next - values)
    return vs, pg_advantages


__all__ = ["vtrace"]
