"""Epsilon-greedy exploration: the one epsilon schedule of DQN acting, wherever the
acting happens (in this process, in actor processes, in Ray actors)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pararl.models import QNetwork


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


__all__ = ["EpsilonSchedule", "epsilon_greedy"]
