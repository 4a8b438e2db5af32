"""`Auto`: a recv policy that waits for all workers or collects partially, decided
from measurements of the sampling it does anyway.

Rule (also in BENCHMARKS.md, section `bench:partial`):
1. Start by waiting for all workers: with a small spread of worker step times it is
   the faster choice, and its rounds are the measurements. Each full round gives the
   round's wall time, every worker's step time (`venv.reply_seconds`: the main
   process sat in `recv`, so arrival = finish) and the forward time of the batch
   the sampler actually ran (`after_forward`).
2. After at least `min_rounds` full rounds and `min_seconds` of them, and after
   every further one, apply the cost model of `pararl.samplers.meta.auto_model` (one
   forward pass at one worker's batch size is timed once, the first time it is
   needed). If it predicts no gain (T_part > (1 - margin) * T_wait: the idle time
   saved does not pay for the extra forward passes at the smaller batch and the
   extra per-call overhead), keep waiting.
3. Otherwise run a trial: windows of partial collection (`recv(min_envs=1)`: act
   on whichever workers are back) and of waiting for all, in the order partial,
   wait, wait, partial, each of at least `check_rounds` rounds' worth of env steps
   and `min_seconds`. The order makes a steady drift of the machine's speed weigh
   on both modes alike; comparing windows taken at different times (all the wait
   rounds first, then partial) let a few percent of drift decide. Then keep the
   mode with more env steps per second, for good. The clock, not the model, has
   the last word: on 2 cores the model over-predicts partial's gain at a few envs
   per worker (sub-ms rounds, where every extra wake-up counts) and under-predicts
   it at thousands (workers step faster once they are no longer in lockstep), see
   BENCHMARKS.md. The trial costs at most two windows of the slower mode per
   sampler, never a share of every sample.
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

from pararl.mp.topology import available_cpus
from pararl.samplers.meta.auto_model import Prediction, WaitRounds, predict
from pararl.samplers.meta.recv import ForwardCost, RecvResult
from pararl.vector.core import BatchVectorEnv

# The trial's windows: ABBA, so that a linear drift of speed charges both modes alike.
TRIAL_ORDER = ("partial", "wait", "wait", "partial")


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
    """Rounds' worth of env steps in each window of the trial."""

    min_seconds: float = 0.05
    """Least seconds of wait rounds before predicting, and of each trial window
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
        self.mode, self.settled = "wait", False
        self.wait_rounds = WaitRounds()
        self.trial = {"wait": _Rate(), "partial": _Rate()}
        self._window: _Rate | None = None  # the trial window running, if any
        self._trial_step = 0
        self.forward_part_s: float | None = None
        self.prediction: Prediction | None = None
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
            if self._window is not None:
                self._window.add(steps, now - self._last)
            full = steps == self.n and self._forward_batch == self.n
            if mode == "wait" and full and self._window is None:
                self.wait_rounds.add(now - self._last, venv.reply_seconds, self._forward_s)
        self._last, self._forward_s = now, 0.0
        self._advance()
        return [result]

    # --- decisions ----------------------------------------------------------------

    def _advance(self) -> None:
        if self.workers < 2 or self.settled:
            return
        if self._window is not None:
            if self._window.steps >= self.check_rounds * self.n and (
                self._window.seconds >= self.min_seconds
            ):
                self._end_window()
            return
        measured = self.wait_rounds.rounds >= self.min_rounds
        if measured and self.wait_rounds.round_s >= self.min_seconds:
            prediction = self._predict()
            if prediction.partial:
                self._decide("trial", prediction)
                self.mode, self._window = TRIAL_ORDER[0], _Rate()
            elif self.prediction is None:
                self._decide("wait", prediction)
            self.prediction = prediction

    def _end_window(self) -> None:
        assert self._window is not None
        self.trial[self.mode].add(self._window.steps, self._window.seconds)
        self._trial_step += 1
        if self._trial_step < len(TRIAL_ORDER):
            self.mode, self._window = TRIAL_ORDER[self._trial_step], _Rate()
            return
        self._window, self.settled = None, True
        faster = self.trial["partial"].per_s() > self.trial["wait"].per_s()
        self._decide("partial" if faster else "wait", self.prediction)

    def _predict(self) -> Prediction:
        if self.forward_part_s is None:
            self.forward_part_s = self._forward_cost(math.ceil(self.n / self.workers))
        return predict(self.wait_rounds, self.forward_part_s, self.workers, self.cores, self.margin)

    def _decide(self, mode: str, prediction: Prediction | None) -> None:
        if mode != "trial":
            self.mode = mode
        self.decisions.append(
            {
                **(prediction.as_dict() if prediction else {}),
                "wait_rate": self.trial["wait"].per_s() or None,
                "partial_rate": self.trial["partial"].per_s() or None,
                "chose": mode,
                "after_wait_rounds": self.wait_rounds.rounds,
            }
        )

    @property
    def deciding(self) -> bool:
        """True before the first prediction and while a trial runs (then the mode
        may still change); False once settled, or while the model sees no gain."""
        if self._shape is None:
            return True  # not begun: nothing measured yet
        if self.workers < 2 or self.settled:
            return False
        return self.prediction is None or self._window is not None

    def summary(self) -> dict[str, Any]:
        """What it chose and on which measurements (for reports)."""
        total = sum(self.steps_by_mode.values()) or 1
        rounds = getattr(self, "wait_rounds", WaitRounds())
        return {
            "partial_share": self.steps_by_mode.get("partial", 0) / total,
            "mode": self.mode,
            "trial_partial_vs_wait": (
                self.trial["partial"].per_s() / self.trial["wait"].per_s()
                if self.settled and self.trial["wait"].per_s() > 0
                else None
            ),
            "step_mean_s": rounds.mean_step if rounds.worker_steps else None,
            "step_cv": rounds.step_cv if rounds.worker_steps else None,
            "decisions": list(self.decisions),
        }
