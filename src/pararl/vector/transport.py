"""How commands reach the env batches: inline (the serial twin) or to worker
processes over pipes, with the data in shared memory.

A transport owns the batch arrays and knows which env rows each worker holds. The
vector env front end (`core.BatchVectorEnv`) speaks to either through the same four
calls: `submit`, `ready`, `receive`, `close`, and `timeout_error` for a worker that
does not answer in time.
"""

from __future__ import annotations

import contextlib
import pickle
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.context import BaseContext
from typing import Any, Protocol

import cloudpickle
import gymnasium as gym
import numpy as np

from pararl.mp.errors import WorkerTimeoutError
from pararl.mp.listen import SPIN_S
from pararl.mp.procs import ProcessGroup
from pararl.mp.shared import ArraySpec, SharedArrays, local_arrays
from pararl.mp.topology import split_evenly
from pararl.vector.batch import EnvBatch
from pararl.vector.worker import BatchLayout, batch_arrays, env_worker, execute, make_envs


class Transport(Protocol):
    arrays: dict[str, np.ndarray]  # the batch arrays by name (shared with the workers)
    slices: list[range]  # env rows owned by each worker

    def submit(self, worker: int, command: str, data: Any) -> None: ...
    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]: ...
    def receive(self, worker: int) -> Any: ...
    def timeout_error(self, worker: int, message: str) -> WorkerTimeoutError: ...
    def close(self, grace: float) -> None: ...


class InlineTransport:
    """Runs every command at once in this process: the serial twin's engine."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        specs: dict[str, ArraySpec],
        layout: BatchLayout,
    ) -> None:
        self.slices = [range(len(env_fns))]
        self.arrays = local_arrays(specs)
        envs = make_envs(env_fns, 0)
        self._batch = EnvBatch(envs, 0, batch_arrays(self.arrays, layout), layout.autoreset_mode)
        self._replies: deque[Any] = deque()

    def submit(self, worker: int, command: str, data: Any) -> None:
        try:
            self._replies.append(execute(self._batch, command, data))
        except Exception as exc:
            failed = self._batch.failed_env
            if failed is not None:
                if hasattr(exc, "add_note"):  # Python 3.11+
                    exc.add_note(f"(raised by env {failed})")
                # as a worker's report names it (`vector.worker`): a population
                # names the env's agent with it, and an actor process reports it
                with contextlib.suppress(AttributeError):
                    exc.env_index = failed  # type: ignore[attr-defined]
            raise

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        return [0] if self._replies else []

    def receive(self, worker: int) -> Any:
        return self._replies.popleft()

    def timeout_error(self, worker: int, message: str) -> WorkerTimeoutError:
        return WorkerTimeoutError(worker, message)  # a command here ends before the wait

    def close(self, grace: float) -> None:
        self._batch.close()


class _Pickled:
    """An env factory sent to a worker with cloudpickle (lambdas, closures work)."""

    def __init__(self, fn: Callable[[], gym.Env]) -> None:
        self.fn = fn

    def __call__(self) -> gym.Env:
        return self.fn()

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps(self.fn)

    def __setstate__(self, state: bytes) -> None:
        self.fn = pickle.loads(state)


def check_picklable(env_fns: Sequence[Callable[[], gym.Env]], method: str) -> None:
    """Fail early, naming the factory, if a factory cannot travel to a worker."""
    for index, fn in enumerate(env_fns):
        try:
            cloudpickle.dumps(fn)
        except Exception as exc:
            raise ValueError(
                f"env factory {index} ({fn!r}) cannot be pickled, which start method "
                f"{method!r} needs: {type(exc).__name__}: {exc}. Build the env inside a "
                "module-level function or functools.partial without unpicklable state "
                "(locks, open files, sockets), or use context='fork'."
            ) from exc


class ProcessTransport:
    """Worker processes, each stepping a contiguous slice of the envs serially."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        num_workers: int,
        specs: dict[str, ArraySpec],
        layout: BatchLayout,
        ctx: BaseContext,
        daemon: bool = True,
        start_timeout: float = 120.0,
        spin_s: float = SPIN_S,
    ) -> None:
        method = ctx.get_start_method()
        if method != "fork":
            check_picklable(env_fns, method)
        self.slices = split_evenly(len(env_fns), num_workers)
        self.shared = SharedArrays(specs, ctx)
        self.arrays = self.shared.arrays
        fns = [_Pickled(fn) for fn in env_fns]
        self.group = ProcessGroup(
            env_worker,
            [(fns[s.start : s.stop], s.start, self.shared, layout, spin_s) for s in self.slices],
            ctx,
            name="pararl-env-worker",
            daemon=daemon,
        )
        self.group.await_ready(start_timeout)

    def submit(self, worker: int, command: str, data: Any) -> None:
        self.group.send(worker, (command, data))

    def ready(self, workers: Sequence[int], timeout: float | None) -> list[int]:
        return self.group.ready(workers, timeout)

    def receive(self, worker: int) -> Any:
        return self.group.receive(worker)

    def timeout_error(self, worker: int, message: str) -> WorkerTimeoutError:
        return self.group.timeout_error(worker, message)

    def close(self, grace: float) -> None:
        self.group.close(grace)
