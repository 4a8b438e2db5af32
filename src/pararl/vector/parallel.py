"""`ParallelVectorEnv`: a few worker processes, each stepping a batch of envs
serially, with all data in shared memory and only small commands on pipes.

A drop-in replacement for `gymnasium.vector.AsyncVectorEnv` (same calls, errors,
infos and autoreset modes), plus partial stepping (`send`/`recv`).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from pararl.mp import listen
from pararl.mp.shared import ArraySpec
from pararl.mp.topology import physical_cores
from pararl.vector.core import BatchVectorEnv
from pararl.vector.layout import ObservationMode, SharedMemory
from pararl.vector.transport import ProcessTransport, Transport
from pararl.vector.worker import BatchLayout


def default_num_workers(num_envs: int) -> int:
    """One worker per physical core available to this process, at most one per env."""
    return max(1, min(physical_cores(), num_envs))


class ParallelVectorEnv(BatchVectorEnv):
    """Envs split over `num_workers` processes (default: physical cores available).

    The positional arguments and keywords are `gymnasium.vector.AsyncVectorEnv`'s,
    with its meanings (see `BatchVectorEnv` for `shared_memory` and
    `observation_mode`); pararl's own options are keyword-only.

    Args:
        env_fns: one factory per env; under `spawn`/`forkserver` they must pickle
            (cloudpickle: lambdas are fine).
        shared_memory: True, False or "auto" (see `BatchVectorEnv`).
        copy: return observations that later steps cannot change (a copy out of
            shared memory). With False, `step`/`reset` return the shared arrays.
        context: multiprocessing start method (`fork`, `forkserver`, `spawn`);
            None uses the platform default.
        daemon: start workers as daemon processes.
        worker: Gymnasium's custom per-env worker function; not supported (a pararl
            worker steps a batch of envs), so anything but None is refused.
        observation_mode: "same", "different" or a `(batched, single)` space pair.
        autoreset_mode: Gymnasium's `NEXT_STEP` (default), `SAME_STEP` or `DISABLED`.
        max_concurrency: at most this many envs step at once: a worker steps its
            envs one after another, so this caps the number of workers.
        num_workers: worker processes; envs are split in contiguous, near-equal slices.
        worker_timeout: seconds a worker may go without answering a command before
            the call raises `WorkerTimeoutError` (None: wait as long as it lives).
        start_timeout: seconds allowed for the workers to build their envs.
        spin_s: longest time a worker busy-waits (yielding its core) for the next
            command, when commands have been following its replies that closely;
            it saves the wake-up of a sleeping core per step. 0: always block; None:
            `pararl.mp.listen.SPIN_S` (0.5 ms), as it is when the env is made.
        shared_infos: info keys whose values travel in shared memory, by an example
            value of each (see `BatchVectorEnv`).
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        shared_memory: SharedMemory = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: ObservationMode = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        max_concurrency: int | None = None,
        *,
        num_workers: int | None = None,
        worker_timeout: float | None = 300.0,
        start_timeout: float = 120.0,
        spin_s: float | None = None,
        shared_infos: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        if worker is not None:
            raise ValueError(
                "ParallelVectorEnv does not take a custom `worker`: its workers each step "
                "a batch of envs through shared memory, so a per-env worker function has "
                "nothing to plug into. Wrap the env (a gymnasium.Wrapper) to change how it "
                "steps or resets, or use gymnasium.vector.AsyncVectorEnv for a custom worker."
            )
        if max_concurrency is not None and (
            not isinstance(max_concurrency, (int, np.integer)) or max_concurrency < 1
        ):
            raise ValueError(
                f"`max_concurrency` must be a positive integer or None, got {max_concurrency!r}."
            )
        n = len(env_fns)
        if num_workers is None:
            num_workers = default_num_workers(n)
        if not 1 <= num_workers <= max(n, 1):
            raise ValueError(
                f"num_workers must be between 1 and the number of envs ({n}), got "
                f"{num_workers}; use SerialVectorEnv to step envs in this process"
            )
        if max_concurrency is not None:
            num_workers = min(num_workers, int(max_concurrency))
        self.context, self.daemon, self.worker = context, daemon, worker
        self.max_concurrency = max_concurrency
        self._requested_workers = num_workers
        self._ctx = mp.get_context(context)
        self._spin_s = listen.SPIN_S if spin_s is None else spin_s
        self._start_timeout = start_timeout
        super().__init__(
            env_fns,
            shared_memory=shared_memory,
            copy=copy,
            observation_mode=observation_mode,
            autoreset_mode=autoreset_mode,
            worker_timeout=worker_timeout,
            shared_infos=shared_infos,
        )

    def _make_transport(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        specs: dict[str, ArraySpec],
        layout: BatchLayout,
    ) -> Transport:
        return ProcessTransport(
            env_fns,
            self._requested_workers,
            specs,
            layout,
            self._ctx,
            daemon=self.daemon,
            start_timeout=self._start_timeout,
            spin_s=self._spin_s,
        )

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (for monitoring and tests)."""
        transport = self._transport
        assert isinstance(transport, ProcessTransport)
        return transport.group.pids
