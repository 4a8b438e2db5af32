"""Vector envs: `ParallelVectorEnv` (worker processes + shared memory) and its
serial twin `SerialVectorEnv`, with Gymnasium's API and partial stepping."""

from pararl.mp.topology import physical_cores
from pararl.vector.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
    WorkerError,
    WorkerTimeoutError,
)
from pararl.vector.parallel import ParallelVectorEnv, default_num_workers
from pararl.vector.serial import SerialVectorEnv

__all__ = [
    "AlreadyPendingCallError",
    "ClosedEnvironmentError",
    "NoAsyncCallError",
    "ParallelVectorEnv",
    "SerialVectorEnv",
    "WorkerError",
    "WorkerTimeoutError",
    "default_num_workers",
    "physical_cores",
]
