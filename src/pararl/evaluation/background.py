"""Greedy evaluation in a child process, overlapped with training.

An evaluation of 20 CartPole episodes that last 500 steps costs ~0.2 s; run in the
training process every few thousand steps, it was a quarter of the time to solve.
Here the training loop sends a copy of the network's weights (numpy arrays: plain
pickles, no shared-memory tensors) and carries on; the returns come back on the pipe
and the session records them against the step count of the snapshot. One evaluation
is in flight at a time; a due one waits for the previous to finish.

The child (`evaluation.child`, serving `evaluation.serve`) is spawned early and
told what to evaluate by its first message. Nobody waits for it to start: requests
queue in the pipe until it is up, and a child that dies or fails is noticed at the
next poll. While idle it also loads matplotlib, so the learning curve at the end of
the run is drawn there, without the import on the training process's clock. A
running evaluation reports how far it is every few seconds (`progress`); a child
silent for `timeout_s` is taken for hung.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium.envs.registration import EnvSpec

from pararl.evaluation.child import EvalChild
from pararl.evaluation.episodes import DEFAULT_EPISODE_CAP, EvalActions, Evaluator, Progress
from pararl.models.population import Stack
from pararl.weights.base import numpy_state

CLOSE_GRACE_S = 0.05  # for an evaluation child with nothing left to do


class BackgroundEvaluator:
    """`Evaluator`'s `submit`/`poll` with the episodes run by a child process.

    `spec`: the env's registration, for an id the trainer registered at run time
    (the child is a fresh interpreter); it must not refer to `__main__`.
    """

    deferred = True  # results arrive later: the session snapshots what it needs

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        episodes: int,
        seed: int,
        model_fn: Callable[[], torch.nn.Module | Stack],
        timeout_s: float = 600.0,
        spec: EnvSpec | None = None,
        child: EvalChild | None = None,
        stream: tuple[int, ...] = (),
        max_steps: int = DEFAULT_EPISODE_CAP,
        actions: EvalActions = "greedy",
        seeds: Sequence[int] = (),
    ) -> None:
        """`seeds`: a population's (`Evaluator`'s); `model_fn` then builds the
        population (`models.population.population_of`)."""
        self.timeout_s, self.max_steps = timeout_s, max_steps
        self._sent_at: float | None = None  # the request in flight: sent, or last heard of
        self.progress: Progress | None = None  # how far the evaluation in flight is
        self._heard = False  # whether the child has answered yet (it is then past its imports)
        if child is None or not child.alive:
            if child is not None:
                child.close(grace=0.0)
            child = EvalChild()
        self._child = child
        self._group = child.group
        setup = (env_fn, episodes, seed, stream, model_fn, spec, max_steps, actions, tuple(seeds))
        self._group.send(0, ("setup", setup))
        self.asked = False  # whether any request was sent: the child then has work of ours
        self._here = (env_fn, episodes, seed, stream, max_steps, actions, tuple(seeds))

    def here(self) -> Evaluator:
        """The evaluator the child runs, built in this process: the same episodes, drawn
        from the same streams (`evaluation.serve`)."""
        env_fn, episodes, seed, stream, max_steps, actions, seeds = self._here
        return Evaluator(env_fn, episodes, seed, stream, max_steps, actions, seeds=seeds)

    @property
    def busy(self) -> bool:
        return self._sent_at is not None

    def submit(self, policy: torch.nn.Module | Stack) -> None:
        self._request(("eval", numpy_state(policy)))

    def _request(self, message: tuple[str, Any]) -> None:
        if self.busy:
            raise RuntimeError("a request is already running; poll() for it first")
        self._group.send(0, message)
        self.asked = True
        self._sent_at = time.monotonic()
        self.progress = None

    def poll(self, timeout: float = 0.0) -> Any:
        """The answer to the request in flight if it arrives within `timeout` s (the
        progress reports that come first are kept in `progress`).

        Raises `WorkerError` if the child failed or died, `WorkerTimeoutError` if it
        has said nothing for longer than `timeout_s`.
        """
        if self._sent_at is None:
            return None
        deadline = time.monotonic() + timeout
        while self._group.ready([0], max(0.0, deadline - time.monotonic())):
            answer = self._group.receive(0)
            self._heard = True
            if not isinstance(answer, Progress):
                self._sent_at = None
                return answer
            self.progress, self._sent_at = answer, time.monotonic()
        if time.monotonic() - self._sent_at > self.timeout_s:
            raise self._group.timeout_error(
                0, f"evaluation process: no answer after {self.timeout_s:.0f} s"
            )
        return None

    def wait(self, timeout: float) -> Any:
        """`poll` until the answer arrives; None after `timeout` s."""
        deadline = time.monotonic() + timeout
        while self.busy and time.monotonic() < deadline:
            answer = self.poll(min(0.5, max(0.0, deadline - time.monotonic())))
            if answer is not None:
                return answer
        return None

    def plot(
        self, metrics_csv: Path, eval_csv: Path, out_png: Path, title: str, timeout: float = 60.0
    ) -> Path | None:
        """Draw the learning curve in the child (matplotlib is loaded there); the
        PNG's path, or None if there was nothing to plot or no answer in time.

        Also None, asking nothing, while the child has never answered: it may still be
        starting (a run stopped before its first evaluation, Ctrl-C at once), and its
        imports at its lower priority take many seconds while other processes keep
        the cores busy; the caller draws the curve itself in about one."""
        if not self._heard:
            return None
        self._request(("plot", (metrics_csv, eval_csv, out_png, title)))
        answer: Path | None = self.wait(timeout)
        return answer

    def close(self) -> None:
        """Stop the child. Every answer it owes has been received by then (or is
        abandoned with the run), so its interpreter's teardown (torch's modules,
        ~0.5 s) is not waited for: it gets `CLOSE_GRACE_S` to exit on its own, then
        is terminated and reaped (idempotent)."""
        self._child.close(grace=CLOSE_GRACE_S)


__all__ = ["BackgroundEvaluator"]
