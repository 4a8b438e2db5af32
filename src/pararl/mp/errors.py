"""Errors of child processes, as the parent sees them and as children send them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteError:
    """An exception raised in a child process, as sent to the parent."""

    message: str
    traceback: str
    env_index: int | None


class WorkerError(RuntimeError):
    """A worker process failed: an exception in one of its envs, or the process died.

    Attributes:
        worker: index of the worker process.
        env_index: global index of the env that raised, or None when the process died
            without a Python exception (killed, segfault) or failed outside any env.
        exitcode: the process exit code when it died, else None.
        remote_traceback: the worker's formatted traceback, when there was one.
    """

    def __init__(
        self,
        worker: int,
        message: str,
        *,
        env_index: int | None = None,
        exitcode: int | None = None,
        remote_traceback: str | None = None,
    ) -> None:
        self.worker = worker
        self.env_index = env_index
        self.exitcode = exitcode
        self.remote_traceback = remote_traceback
        where = f"worker {worker}" + (f", env {env_index}" if env_index is not None else "")
        text = f"{where}: {message}"
        if remote_traceback:
            text += f"\n\n--- traceback in {where} ---\n{remote_traceback.rstrip()}"
        super().__init__(text)


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker did not answer within the configured `worker_timeout` (it hangs)."""
