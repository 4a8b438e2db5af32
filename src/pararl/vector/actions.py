"""How a batch of actions reaches the envs.

An action batch already laid out as the shared action array (a numpy array of its
dtype and row shape) is written there: the fast path, nothing else travels. Any
other batch (a list, another dtype, a Dict or Tuple space, a space that cannot
live in shared memory) is split per env exactly as `gymnasium.vector.AsyncVectorEnv`
splits it (`gymnasium.vector.utils.iterate`), and each env's action travels with
its worker's command, so every env gets the very object Gymnasium would pass it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import iterate

from pararl.vector.worker import WithActions


def place_actions(
    shared: np.ndarray | None, space: gym.Space, actions: Any, rows: np.ndarray | None, count: int
) -> list[Any] | None:
    """Put the actions of `count` envs (rows `rows` of the batch, all when None) in
    `shared` and return None, or return them listed per env, in order."""
    if (
        shared is not None
        and type(actions) is np.ndarray
        and actions.dtype == shared.dtype
        and actions.shape == (shared.shape if rows is None else (count, *shared.shape[1:]))
    ):
        if rows is None:
            shared[...] = actions
        else:
            shared[rows] = actions
        return None
    listed = list(iterate(space, actions))
    if len(listed) != count:
        # Gymnasium's message (its zip over the pipes fails), and what to do.
        side = "shorter" if len(listed) < count else "longer"
        raise ValueError(
            f"zip() argument 2 is {side} than argument 1: got {len(listed)} actions for "
            f"{count} envs; pass one action per env"
        )
    return listed


def _local_ids(local: list[int] | None, rows: np.ndarray) -> list[int] | None:
    return local


def step_payload(
    shared: np.ndarray | None, space: gym.Space, actions: Any, ids: np.ndarray | None, n: int
) -> Callable[[list[int] | None, np.ndarray], Any]:
    """Place the actions of envs `ids` (all `n` when None; in the order given) and
    return what each worker's step command carries: its local ids, and its envs'
    actions when they do not travel through shared memory."""
    count = n if ids is None else ids.size
    listed = place_actions(shared, space, actions, ids, count)
    if listed is None:
        return _local_ids  # the hot path: nothing but the ids travels
    if ids is None:
        return lambda local, rows: WithActions(local, listed[rows[0] : rows[-1] + 1])
    by_row = dict(zip(ids.tolist(), listed, strict=True))
    return lambda local, rows: WithActions(local, [by_row[r] for r in rows.tolist()])
