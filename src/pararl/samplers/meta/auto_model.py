"""The cost model behind the `auto` recv policy: wait-for-all measurements in, a
prediction of both policies' time per round out.

Everything here comes from rounds the sampler runs anyway in wait-for-all mode, so
measuring costs nothing: the round's wall time R (one `recv` return to the next),
each worker's step time X_w (from the vector env: command sent to reply arrived,
while the main process waited), and the forward time F(n) of the full batch that
round actually ran. The only extra measurement is F(n/W), one forward pass at one
worker's batch size, timed once per sampler (`Auto` caches it).

With W workers, C cores and the main process's time per round M = R - max_w X_w
(forward, recording, sending), of which o = M - F(n) is per-call overhead:

    T_wait = R = E[max_w X_w] + M
    T_part = max( mean X + F(n/W) + o,                each worker's own cycle
                  W * (F(n/W) + o),                   the main process as bottleneck
                  W * (mean X + F(n/W) + o) / C )     all CPU work over the cores

Partial collection saves the idle time E[max X] - mean X (and overlaps the forward
passes with stepping), but pays W forward passes at the small batch and W times the
per-call overhead instead of one. The overhead of a partial call is taken as the
whole round's o (an upper bound: part of o scales with the envs returned). The
max(...) assumes perfect overlap, so T_part is optimistic where the terms are close
(the main process then queues workers). Partial is worth trying only if it is
predicted `margin` faster: T_part <= (1 - margin) * T_wait; `Auto` then lets the
clock decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class WaitRounds:
    """Running sums over full wait-for-all rounds (kept across samples)."""

    rounds: int = 0
    round_s: float = 0.0  # sum of round wall times R
    max_step_s: float = 0.0  # sum over rounds of the slowest worker's step time
    forward_s: float = 0.0  # sum of the full-batch forward times F(n)
    worker_steps: int = 0  # worker-rounds summed below
    step_s: float = 0.0
    step_sq: float = 0.0

    def add(self, round_s: float, step_s: np.ndarray, forward_s: float) -> None:
        """One full round: its wall time, every worker's step time, its forward time."""
        if not step_s.size or not np.isfinite(step_s).all():
            return
        self.rounds += 1
        self.round_s += round_s
        self.max_step_s += float(step_s.max())
        self.forward_s += forward_s
        self.worker_steps += step_s.size
        self.step_s += float(step_s.sum())
        self.step_sq += float(np.square(step_s).sum())

    def mean(self, total: float) -> float:
        return total / self.rounds if self.rounds else 0.0

    @property
    def mean_step(self) -> float:
        return self.step_s / self.worker_steps if self.worker_steps else 0.0

    @property
    def step_cv(self) -> float:
        """Coefficient of variation of worker step times (across workers and rounds)."""
        mean = self.mean_step
        if mean <= 0:
            return 0.0
        var = max(0.0, self.step_sq / self.worker_steps - mean * mean)
        return math.sqrt(var) / mean


@dataclass(frozen=True)
class Prediction:
    """Both policies' predicted seconds per round, and the choice."""

    t_wait_s: float
    t_part_s: float
    idle_s: float  # E[max X] - mean X: what waiting for the slowest costs per round
    mean_step_s: float
    step_cv: float
    forward_all_s: float
    forward_part_s: float
    overhead_s: float
    partial: bool

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def predict(
    rounds: WaitRounds, forward_part_s: float, workers: int, cores: int, margin: float
) -> Prediction:
    """Apply the module's rule to the measurements (pure: no clock, no env)."""
    t_wait = rounds.mean(rounds.round_s)
    max_step = rounds.mean(rounds.max_step_s)
    forward_all = rounds.mean(rounds.forward_s)
    main = max(0.0, t_wait - max_step)
    overhead = max(0.0, main - forward_all)
    mean_step = rounds.mean_step
    per_call = forward_part_s + overhead
    t_part = max(
        mean_step + per_call,
        workers * per_call,
        workers * (mean_step + per_call) / max(1, cores),
    )
    return Prediction(
        t_wait_s=t_wait,
        t_part_s=t_part,
        idle_s=max(0.0, max_step - mean_step),
        mean_step_s=mean_step,
        step_cv=rounds.step_cv,
        forward_all_s=forward_all,
        forward_part_s=forward_part_s,
        overhead_s=overhead,
        partial=workers > 1 and rounds.rounds > 0 and t_part <= (1 - margin) * t_wait,
    )
