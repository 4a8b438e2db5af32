"""Batching per-env info dicts into Gymnasium's vector layout.

Layout (Gymnasium 1.x): each key maps to an array over the batch, paired with a
boolean mask `_key` saying which envs reported it; nested dicts recurse;
`final_obs` is an object array of unbatched observations.

Workers batch their own envs' infos (`batch_infos`) and send one dict of columns;
the caller merges the workers' columns (`merge_columns`): per key one array
assignment per worker, instead of pickling and merging one dict per env.
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


def _is_scalar(value: Any) -> bool:
    return type(value) in (int, float, bool) or isinstance(value, np.number)


def _scalar_columns(rows: list[tuple[int, dict[str, Any]]], size: int) -> dict[str, Any] | None:
    """The common case in one pass per key: every info has the same keys, all scalar
    (e.g. MuJoCo's reward terms each step). None when that does not hold."""
    first = rows[0][1]
    keys = first.keys()
    if not all(_is_scalar(v) for v in first.values()):
        return None
    if any(info.keys() != keys for _, info in rows[1:]):
        return None
    positions = [row for row, _ in rows]
    batched: dict[str, Any] = {}
    for key, value in first.items():
        column = np.zeros(size, dtype=type(value))
        column[positions] = [info[key] for _, info in rows]
        mask = np.zeros(size, dtype=np.bool_)
        mask[positions] = True
        batched[key], batched[f"_{key}"] = column, mask
    return batched


def batch_infos(rows: Iterable[tuple[int, dict[str, Any]]], size: int) -> dict[str, Any]:
    """Batch `(row, info)` pairs, applied in the given order (rows distinct or not)."""
    pairs = [(row, info) for row, info in rows if info]
    if not pairs:
        return {}
    if len({row for row, _ in pairs}) == len(pairs):
        fast = _scalar_columns(pairs, size)
        if fast is not None:
            return fast
    batched: dict[str, Any] = {}
    for row, info in pairs:
        add_info(batched, info, row, size)
    return batched


def merge_columns(
    dst: dict[str, Any], src: dict[str, Any], positions: np.ndarray, size: int
) -> dict[str, Any]:
    """Merge `src`, batched infos over k envs, into `dst`, batched over `size` envs:
    row j of every `src` column goes to row `positions[j]` of `dst`'s."""
    for key, value in src.items():
        if isinstance(value, dict):
            dst[key] = merge_columns(dst.get(key, {}), value, positions, size)
            continue
        column = dst.get(key)
        if column is None:
            if value.dtype == object:
                column = np.full((size, *value.shape[1:]), None, dtype=object)
            else:
                column = np.zeros((size, *value.shape[1:]), dtype=value.dtype)
            dst[key] = column
        column[positions] = value
    return dst
