"""Greedy evaluation in a child process, overlapped with training.

An evaluation of 20 CartPole episodes that last 500 steps costs ~0.2 s; run in the
training process every few thousand steps, it was a quarter of the time to solve.
Here the training loop sends a copy of the network's weights (numpy arrays: plain
pickles, no shared-memory tensors) and carries on; the returns come back on the pipe
and the session records them against the step count of the snapshot. One evaluation
is in flight at a time; a due one waits for the previous to finish.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl.evaluate import Evaluator, GreedyModel, as_policy
from pararl.vector.errors import WorkerTimeoutError
from pararl.vector.procs import ProcessGroup

START_TIMEOUT_S = 60.0


def _serve(
    conn: Connection,
    env_fn: Callable[[], gym.Env],
    episodes: int,
    seed: int,
    model_fn: Callable[[], torch.nn.Module],
) -> None:
    evaluator = Evaluator(env_fn, episodes, seed)
    model = model_fn()
    conn.send((True, "ready"))
    try:
        while True:
            command, weights = conn.recv()  # EOFError if the parent is gone: we exit
            if command == "close":
                return
            model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
            conn.send((True, evaluator.run(as_policy(model))))
    finally:
        evaluator.close()


class BackgroundEvaluator:
    """`Evaluator`'s `submit`/`poll` with the episodes run by a child process."""

    deferred = True  # results arrive later: the session snapshots what it needs

    def __init__(
        self,
        env_fn: Callable[[], gym.Env],
        episodes: int,
        seed: int,
        model_fn: Callable[[], torch.nn.Module],
        timeout_s: float = 600.0,
    ) -> None:
        self.timeout_s = timeout_s
        self._sent_at: float | None = None
        self._group = ProcessGroup(
            _serve, [(env_fn, episodes, seed, model_fn)], mp.get_context(), name="pararl-eval"
        )
        try:
            self._group.await_ready(START_TIMEOUT_S)
        except BaseException:
            self._group.kill()
            raise

    @property
    def busy(self) -> bool:
        return self._sent_at is not None

    def submit(self, policy: GreedyModel) -> None:
        if self.busy:
            raise RuntimeError("an evaluation is already running; poll() for it first")
        weights: dict[str, Any] = {
            k: v.detach().cpu().numpy().copy() for k, v in policy.state_dict().items()
        }
        self._group.send(0, ("eval", weights))
        self._sent_at = time.monotonic()

    def poll(self, timeout: float = 0.0) -> np.ndarray | None:
        """The returns of the evaluation in flight if they arrive within `timeout` s.

        Raises `WorkerError` if the child failed or died, `WorkerTimeoutError` if the
        evaluation has run for longer than `timeout_s`.
        """
        if self._sent_at is None:
            return None
        if not self._group.ready([0], timeout):
            if time.monotonic() - self._sent_at > self.timeout_s:
                raise WorkerTimeoutError(
                    0, f"evaluation still running after {self.timeout_s:.0f} s (does it hang?)"
                )
            return None
        self._sent_at = None
        result: np.ndarray = self._group.receive(0)
        return result

    def close(self) -> None:
        self._group.close()


__all__ = ["BackgroundEvaluator"]
