"""Errors of child processes, as the parent sees them and as children send them.

An exception raised by user code in a child (an env's `step`, say) comes back as a
`WorkerError` that is *also* an instance of the exception's own type, the way
`gymnasium.vector.AsyncVectorEnv` re-raises it: `except ValueError:` around a call
keeps working, and the worker index, env index and remote traceback stay attached.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import traceback
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteError:
    """An exception raised in a child process, as sent to the parent."""

    message: str
    traceback: str
    env_index: int | None
    text: str = ""  # str() of the exception itself
    exc_type: bytes | None = None  # the exception's type, pickled (None: not picklable)

    @classmethod
    def of(cls, exc: BaseException, env_index: int | None) -> RemoteError:
        """The report of `exc`, being handled now in the child."""
        try:
            kind: bytes | None = pickle.dumps(type(exc))
        except Exception:  # a class pickle cannot name (local, dynamic): no own type
            kind = None
        return cls(
            f"{type(exc).__name__}: {exc}", traceback.format_exc(), env_index, str(exc), kind
        )


@contextlib.contextmanager
def envs_from(base: int) -> Iterator[None]:
    """In a child that steps a block of the run's envs in its own serial vector env,
    whose first is the run's env `base`: an env's failure in the block (its
    `env_index` counts the child's envs) is re-based to count the run's, as the
    parent's `WorkerError` says it."""
    try:
        yield
    except Exception as exc:
        index = getattr(exc, "env_index", None)
        if index is not None:
            with contextlib.suppress(AttributeError):
                exc.env_index = index + base  # type: ignore[attr-defined]
        raise


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
        # As the env's own type the message comes first, as the env wrote it.
        text = f"{message} (in {where})" if _owned(self) else f"{where}: {message}"
        if remote_traceback:
            text += f"\n\n--- traceback in {where} ---\n{remote_traceback.rstrip()}"
        # BaseException's, not super()'s: in a class that is also the env's own
        # exception type, the next __init__ in line is that type's, with its own
        # arguments.
        BaseException.__init__(self, text)


class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker did not answer within the configured `worker_timeout` (it hangs)."""


def _owned(error: WorkerError) -> bool:
    return getattr(type(error), "_own_type", False)


@functools.cache
def _as_own_type(exc_type: type[BaseException]) -> type[WorkerError] | None:
    """A `WorkerError` subclass that is also `exc_type` (same name and module, so a
    traceback reads as the env's error), or None where the two cannot be combined."""
    if not issubclass(exc_type, Exception) or issubclass(exc_type, WorkerError):
        return None
    namespace = {
        "__module__": exc_type.__module__,
        "__qualname__": exc_type.__qualname__,
        "__str__": BaseException.__str__,  # KeyError's would quote the whole text
        "_own_type": True,
    }
    try:
        return type(exc_type.__name__, (WorkerError, exc_type), namespace)
    except TypeError:  # incompatible layouts or a final class
        return None


def worker_error(index: int, report: RemoteError) -> WorkerError:
    """The caller-side exception for a `RemoteError` sent by child `index`: of the
    remote exception's own type too, when that type can be loaded here."""
    own: type[WorkerError] | None = None
    if report.exc_type is not None:
        try:
            own = _as_own_type(pickle.loads(report.exc_type))
        except Exception:  # the class does not exist in this process
            own = None
    if own is None:
        return WorkerError(
            index, report.message, env_index=report.env_index, remote_traceback=report.traceback
        )
    error = own.__new__(own, report.text)  # OSError's __new__ reads its arguments
    WorkerError.__init__(
        error,
        index,
        report.text,
        env_index=report.env_index,
        remote_traceback=report.traceback,
    )
    return error
