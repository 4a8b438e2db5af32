"""The rules of Gymnasium's vector-env calls, with `AsyncVectorEnv`'s errors.

Which call may follow which (`require`), how seeds and `reset_mask` are read, and
the exceptions (types and messages) that `gymnasium.vector.AsyncVectorEnv` raises
for each misuse, so code written against it reads the same errors here. pararl's
partial stepping (`send`/`recv`) adds one state, `partial`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from pararl.vector.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
    WorkerError,
)

# The call that starts each waiting state, and the call that ends it.
STARTS = {"reset": "reset_async", "step": "step_async", "call": "call_async", "partial": "send"}
ENDS = {"reset": "reset_wait", "step": "step_wait", "call": "call_wait", "partial": "recv"}


def require(state: str, wanted: str, call: str) -> None:
    """Raise Gymnasium's error unless the env is in state `wanted` for `call`."""
    if state == wanted:
        return
    if wanted == "default":
        # Gymnasium's messages differ by a full stop; they are matched as they are.
        stop = "" if call == "reset_async" else "."
        raise AlreadyPendingCallError(
            f"Calling `{call}` while waiting for a pending call to `{state}` to complete{stop}",
            state,
        )
    raise NoAsyncCallError(
        f"Calling `{call}` without any prior call to `{STARTS[wanted]}`.", wanted
    )


def log_worker_error(error: WorkerError) -> None:
    """Gymnasium's log lines for an env's exception, before it is raised here (Worker-i
    names the env, which is Gymnasium's worker; a process death has no traceback)."""
    if not error.remote_traceback:
        return
    index = error.worker if error.env_index is None else error.env_index
    gym.logger.error(f"Received the following error from Worker-{index} - Shutting it down")
    gym.logger.error(error.remote_traceback)
    gym.logger.error("Raising the last exception back to the main process.")


def closed_error(name: str) -> ClosedEnvironmentError:
    return ClosedEnvironmentError(f"Trying to operate on `{name}`, after a call to `close()`.")


def expand_seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """Gymnasium's rule: None -> no seeds, int s -> s, s+1, ..., list -> as given."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(
            f"If seeds are passed as a list the length must match num_envs={n} but got "
            f"length={len(seeds)}."
        )
    return seeds


def reset_mask_ids(options: dict[str, Any] | None, n: int) -> tuple[np.ndarray, dict | None]:
    """Env ids to reset (from `options['reset_mask']`, else all) and the options left
    (the caller's dict is not changed)."""
    if not options or "reset_mask" not in options:
        return np.arange(n), options
    options = dict(options)
    mask = options.pop("reset_mask")
    if not isinstance(mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
    if mask.shape != (n,):
        raise ValueError(f"`options['reset_mask']` must have shape `({n},)`, got {mask.shape}")
    if mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}")
    if not mask.any():
        raise ValueError(
            "`options['reset_mask']` must contain a boolean array with at least one True "
            f"value, got reset_mask={mask}"
        )
    return np.flatnonzero(mask), options


def attr_values(values: Any, n: int) -> list[Any]:
    """`set_attr`'s values: one per env, or one value (not a list or tuple) for all."""
    if not isinstance(values, (list, tuple)):
        return [values] * n
    if len(values) != n:
        raise ValueError(
            "Values must be a list or tuple with length equal to the number of "
            f"environments. Got `{len(values)}` values for {n} environments."
        )
    return list(values)
