"""Batching per-env info dicts into Gymnasium's vector layout.

Layout (Gymnasium 1.x): each key maps to an array over the batch, paired with a
boolean mask `_key` saying which envs reported it; nested dicts recurse;
`final_obs` is an object array of unbatched observations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np


def _new_column(value: Any, size: int) -> np.ndarray:
    if type(value) in (int, float, bool) or isinstance(value, np.number):
        return np.zeros(size, dtype=type(value))
    if isinstance(value, np.ndarray):
        return np.zeros((size, *value.shape), dtype=value.dtype)
    return np.full(size, fill_value=None, dtype=object)


def add_info(batched: dict[str, Any], info: dict[str, Any], row: int, size: int) -> dict[str, Any]:
    """Merge one env's `info` into `batched` at `row` of a batch of `size` envs."""
    for key, value in info.items():
        if key == "final_obs":
            column = batched.get(key)
            if column is None:
                column = np.full(size, fill_value=None, dtype=object)
            column[row] = value
        elif isinstance(value, dict):
            column = add_info(batched.get(key, {}), value, row, size)
        else:
            column = batched.get(key)
            if column is None:
                column = _new_column(value, size)
            column[row] = value
        mask = batched.get(f"_{key}")
        if mask is None:
            mask = np.zeros(size, dtype=np.bool_)
        mask[row] = True
        batched[key], batched[f"_{key}"] = column, mask
    return batched


def batch_infos(rows: Iterable[tuple[int, dict[str, Any]]], size: int) -> dict[str, Any]:
    """Batch `(row, info)` pairs, applied in the given order."""
    batched: dict[str, Any] = {}
    for row, info in rows:
        if info:
            add_info(batched, info, row, size)
    return batched
