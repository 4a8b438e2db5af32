"""`Auto`: a recv policy that waits for all workers or collects partially,
whichever running measurements say is faster.

Measured, not configured:
- the forward pass at the two batch sizes that matter, F(n) (all envs) and
  F(n/W) (one worker's envs), timed once per sample by the sampler;
- per-worker step times X_w: during a *measure* phase the policy waits for all
  workers but takes each worker's reply as it arrives (`recv(min_envs=1)` until
  none is in flight), so it sees when each worker finished (the main process is
  idle then, so arrival = finish); their mean, the mean of the slowest, and the
  coefficient of variation (spread) across workers;
- the wall time of a wait-all round, T_wait, and from it the per-round overhead
  o = T_wait - E[max_w X_w] - F(n) (sending, recording, copying).

Decision rule (documented in BENCHMARKS.md too). Waiting for all costs
T_wait = E[max_w X_w] + F(n) + o per round: every worker idles until the slowest
is done and then until the single big forward pass is over. Partial collection
runs one forward pass per worker as it arrives, overlapped with the others'
stepping, so a round costs about
    T_part = max(mean X + F(n/W) + o,          each worker's own cycle
                 W * (F(n/W) + o),              the main process as bottleneck
                 (W * mean X + W * (F(n/W) + o)) / cores)   all CPU work / cores.
Partial is *tried* only if T_part < (1 - margin) * T_wait: the spread of worker
step times (E[max] - mean, which grows with the CV and with envs per worker)
must pay for W - 1 extra forward passes and their overhead. A tried partial
phase is timed (env steps per second) and kept only if it beats the wait-all
phase's measured rate; the model picks what to try, the clock decides. Every
`recheck_rounds` rounds the policy measures again, so it follows changes in
step times or network cost. With one worker there is nothing to overlap: it
always waits for all.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pararl.samplers.recv import ForwardCost, RecvResult
from pararl.vector.core import BatchVectorEnv
from pararl.vector.topology import available_cpus


@dataclass
class _Phase:
    mode: str
    start: float | None = None  # end of the phase's first recv (its first is a warm-up)
    end: float = 0.0
    steps: int = 0  # env steps returned after the warm-up recv
    calls: int = 0
    arrivals: list[list[float]] = field(default_factory=list)  # per round: finish times

    def rate(self) -> float:
        if self.start is None or self.end <= self.start or not self.steps:
            return 0.0
        return self.steps / (self.end - self.start)


@dataclass
class Auto:
    """Wait for all or take partial batches, from running measurements (see module)."""

    probe_rounds: int = 3
    """Rounds (env steps / envs) of each measure and trial phase, after a warm-up."""

    recheck_rounds: int = 64
    """Rounds between two measure phases."""

    margin: float = 0.05
    """Partial must be predicted this much faster than waiting to be tried."""

    name: str = "auto"
    decisions: list[dict[str, Any]] = field(default_factory=list)
    steps_by_mode: dict[str, int] = field(default_factory=dict)

    def begin(self, num_envs: int, worker_of: np.ndarray, forward_cost: ForwardCost) -> None:
        self.n = num_envs
        self.worker_of = worker_of
        self.workers = int(worker_of.max()) + 1 if worker_of.size else 1
        self.cores = max(1, len(available_cpus()))
        part = math.ceil(num_envs / self.workers)
        self.f_all = forward_cost(num_envs)
        self.f_part = forward_cost(part) if part != num_envs else self.f_all
        self.wait_rate = 0.0
        self.prediction: dict[str, Any] = {}
        self._enter("measure" if self.workers > 1 else "wait")

    def _enter(self, mode: str) -> None:
        self.phase = _Phase(mode)

    def after_forward(self, batch: int, seconds: float) -> None:
        pass  # F is timed at the two batch sizes that matter in `begin`

    # --- recv -------------------------------------------------------------------

    def recv(self, venv: BatchVectorEnv) -> list[RecvResult]:
        phase = self.phase
        start = time.perf_counter()
        if phase.mode == "measure":
            results, finish = self._staged(venv, start)
            if phase.start is not None:
                phase.arrivals.append(finish)
        elif phase.mode in ("partial", "trial"):
            results = [venv.recv(min_envs=1)]
        else:
            results = [venv.recv()]
        steps = sum(int(r[5].size) for r in results)
        self.steps_by_mode[phase.mode] = self.steps_by_mode.get(phase.mode, 0) + steps
        phase.end = time.perf_counter()
        phase.calls += 1
        if phase.start is None:
            phase.start = phase.end
        else:
            phase.steps += steps
        self._advance()
        return results

    def _staged(self, venv: BatchVectorEnv, start: float) -> tuple[list[RecvResult], list[float]]:
        """Wait for all, one arrival at a time: the results and each worker's finish time."""
        results, finish = [], []
        while venv.in_flight.any():
            result = venv.recv(min_envs=1)
            now = time.perf_counter() - start
            finish += [now] * len(np.unique(self.worker_of[result[5]]))
            results.append(result)
        return results, finish

    # --- decisions ----------------------------------------------------------------

    def _advance(self) -> None:
        phase = self.phase
        if phase.mode == "measure":
            if len(phase.arrivals) >= self.probe_rounds:
                self._decide_trial(phase)
        elif phase.mode == "trial":
            if phase.steps >= self.probe_rounds * self.n:
                partial_rate = phase.rate()
                keep = partial_rate > self.wait_rate
                self.decisions.append(
                    {
                        **self.prediction,
                        "partial_rate": partial_rate,
                        "chose": "partial" if keep else "wait",
                    }
                )
                self._enter("partial" if keep else "wait")
        elif phase.steps >= self.recheck_rounds * self.n and self.workers > 1:
            self._enter("measure")

    def _decide_trial(self, phase: _Phase) -> None:
        finish = [np.asarray(f) for f in phase.arrivals if f]
        per_worker = np.concatenate(finish)
        mean_x = float(per_worker.mean())
        max_x = float(np.mean([f.max() for f in finish]))
        cv = float(per_worker.std() / mean_x) if mean_x > 0 else 0.0
        t_wait = (phase.end - (phase.start or phase.end)) / max(1, phase.calls - 1)
        overhead = max(0.0, t_wait - max_x - self.f_all)
        w, f = self.workers, self.f_part + overhead
        t_part = max(mean_x + f, w * f, (w * mean_x + w * f) / self.cores)
        self.wait_rate = phase.rate()
        self.prediction = {
            "mean_step_s": mean_x,
            "max_step_s": max_x,
            "step_cv": cv,
            "forward_all_s": self.f_all,
            "forward_part_s": self.f_part,
            "overhead_s": overhead,
            "t_wait_s": t_wait,
            "t_part_pred_s": t_part,
            "wait_rate": self.wait_rate,
        }
        if t_part < (1 - self.margin) * t_wait:
            self._enter("trial")
        else:
            self.decisions.append({**self.prediction, "partial_rate": None, "chose": "wait"})
            self._enter("wait")

    def summary(self) -> dict[str, Any]:
        """What it chose and on which measurements (for reports)."""
        total = sum(self.steps_by_mode.values()) or 1
        partial = self.steps_by_mode.get("partial", 0) + self.steps_by_mode.get("trial", 0)
        return {
            "partial_share": partial / total,
            "decisions": list(self.decisions),
        }
