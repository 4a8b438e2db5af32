"""Named errors of the vector envs (the worker errors are the process kernel's).

The misuse errors are Gymnasium's own classes, so code written against
`gymnasium.vector.AsyncVectorEnv` catches them unchanged.
"""

from __future__ import annotations

from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

from pararl.mp.errors import WorkerError, WorkerTimeoutError

__all__ = [
    "AlreadyPendingCallError",
    "ClosedEnvironmentError",
    "NoAsyncCallError",
    "WorkerError",
    "WorkerTimeoutError",
]
