"""`Auto`: a recv policy that waits for all workers or collects partially, decided
from measurements of the sampling it does anyway.

Rule (also in BENCHMARKS.md, section `bench:partial`):
1. Start by waiting for all workers: with a small spread of worker step times it is
   the faster choice, and its rounds are the measurements. Each full round gives the
   round's wall time, every worker's step time (`venv.reply_seconds`: the main
   process sat in `recv`, so arrival = finish) and the forward time of the batch
   the sampler actually ran (`after_forward`).
2. After at least `min_rounds` full rounds and `min_seconds` of them, and after
   every further one, apply the cost model of `pararl.samplers.auto_model` (one
   forward pass at one worker's batch size is timed once, the first time it is
   needed). If it predicts no gain (T_part > (1 - margin) * T_wait: the idle time
   saved does not pay for the extra forward passes at the smaller batch and the
   extra per-call overhead), keep waiting.
3. Otherwise collect partially (`recv(min_envs=1)`: act on whichever workers are
   back) and time it as it runs. After `check_rounds` rounds' worth of env steps
   and `min_seconds`, and at every further such window, compare its env steps per
   second with the measured wait-for-all rate; if slower, drop partial for good and
   wait for all again. The clock, not the model, has the last word: on 2 cores the
   model over-predicts partial's gain at a few envs per worker (sub-ms rounds, where
   every extra wake-up counts) and under-predicts it at thousands (workers step
   faster once they are no longer in lockstep), see BENCHMARKS.md. This one check
   costs at most one window of slower sampling per sampler, never a share of every
   sample.
4. Everything is kept across `sample` calls of the same sampler (the same `Auto`),
   so later samples start in the chosen mode and measure nothing again. New
   measurements start only if the number of envs or workers changes.
With one worker there is nothing to overlap: it always waits for all.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pararl.samplers.auto_model import Prediction, WaitRounds, predict
from pararl.samplers.recv import ForwardCost, RecvResult
from pararl.vector.core import BatchVectorEnv
from pararl.vector.topology import available_cpus


@dataclass
class _Rate:
    """Env steps and seconds of rounds run in one mode (for the clock check)."""

    steps: int = 0
    seconds: float = 0.0

    def add(self, steps: int, seconds: float) -> None:
        self.steps += steps
        self.seconds += seconds

    def per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Auto:
    """Wait for all or take partial batches, from free running measurements (see module)."""

    min_rounds: int = 8
    """Full wait-for-all rounds measured before the first prediction."""

    check_rounds: int = 8
    """Rounds' worth of env steps between two checks of partial against wait-for-all."""

    min_seconds: float = 0.05
    """Least seconds of wait rounds before predicting, and of partial rounds per check
    (sub-ms rounds are too noisy to judge over a few rounds)."""

    margin: float = 0.0
    """Partial must be predicted this much faster than waiting to be tried."""

    name: str = "auto"
    mode: str = "wait"
    decisions: list[dict[str, Any]] = field(default_factory=list)
    steps_by_mode: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._shape: tuple[int, int] | None = None

    def begin(self, num_envs: int, worker_of: np.ndarray, forward_cost: ForwardCost) -> None:
        workers = int(worker_of.max()) + 1 if worker_of.size else 1
        if self._shape != (num_envs, workers):
            self._reset(num_envs, workers)
        self._forward_cost = forward_cost
        self._last: float | None = None  # when the previous recv of this sample returned
        self._forward_s, self._forward_batch = 0.0, 0

    def _reset(self, num_envs: int, workers: int) -> None:
        self._shape = (num_envs, workers)
        self.n, self.workers = num_envs, workers
        self.cores = max(1, len(available_cpus()))
        self.mode, self.rejected = "wait", False
        self.wait_rounds = WaitRounds()
        self.rates = {"wait": _Rate(), "partial": _Rate()}
        self.forward_part_s: float | None = None
        self.prediction: Prediction | None = None
        self._next_check = self.check_rounds * num_envs
        self.decisions.clear()
        self.steps_by_mode.clear()

    def after_forward(self, batch: int, seconds: float) -> None:
        self._forward_s += seconds
        self._forward_batch = batch

    # --- recv -------------------------------------------------------------------

    def recv(self, venv: BatchVectorEnv) -> list[RecvResult]:
        mode = self.mode
        result = venv.recv(min_envs=1) if mode == "partial" else venv.recv()
        now = time.perf_counter()
        steps = int(result[5].size)
        self.steps_by_mode[mode] = self.steps_by_mode.get(mode, 0) + steps
        if self._last is not None:
            self.rates[mode].add(steps, now - self._last)
            full = steps == self.n and self._forward_batch == self.n
            if mode == "wait" and full:
                self.wait_rounds.add(now - self._last, venv.reply_seconds, self._forward_s)
        self._last, self._forward_s = now, 0.0
        self._advance()
        return [result]

    # --- decisions ----------------------------------------------------------------

    def _advance(self) -> None:
        if self.workers < 2 or self.rejected:
            return
        measured = self.wait_rounds.rounds >= self.min_rounds
        if self.mode == "wait" and measured and self.wait_rounds.round_s >= self.min_seconds:
            prediction = self._predict()
            if prediction.partial or self.prediction is None:
                self._decide("partial" if prediction.partial else "wait", prediction)
            self.prediction = prediction
        elif self.mode == "partial" and self._window_done(self.rates["partial"]):
            self._next_check += self.check_rounds * self.n
            if self.rates["partial"].per_s() < self.rates["wait"].per_s():
                self.rejected = True
                self._decide("wait", self.prediction)

    def _window_done(self, rate: _Rate) -> bool:
        return rate.steps >= self._next_check and rate.seconds >= self.min_seconds

    def _predict(self) -> Prediction:
        if self.forward_part_s is None:
            self.forward_part_s = self._forward_cost(math.ceil(self.n / self.workers))
        return predict(self.wait_rounds, self.forward_part_s, self.workers, self.cores, self.margin)

    def _decide(self, mode: str, prediction: Prediction | None) -> None:
        self.mode = mode
        self.decisions.append(
            {
                **(prediction.as_dict() if prediction else {}),
                "wait_rate": self.rates["wait"].per_s(),
                "partial_rate": self.rates["partial"].per_s() or None,
                "chose": mode,
                "after_wait_rounds": self.wait_rounds.rounds,
            }
        )

    def summary(self) -> dict[str, Any]:
        """What it chose and on which measurements (for reports)."""
        total = sum(self.steps_by_mode.values()) or 1
        rounds = getattr(self, "wait_rounds", WaitRounds())
        return {
            "partial_share": self.steps_by_mode.get("partial", 0) / total,
            "mode": self.mode,
            "step_mean_s": rounds.mean_step if rounds.worker_steps else None,
            "step_cv": rounds.step_cv if rounds.worker_steps else None,
            "decisions": list(self.decisions),
        }
