"""Batching per-env info dicts into Gymnasium's vector layout.

Layout (Gymnasium 1.x): each key maps to an array over the batch, paired with a
boolean mask `_key` saying which envs reported it; nested dicts recurse;
`final_obs` is an object array of unbatched observations.

Workers pack their own envs' infos (`pack_infos`: one record array when every env
reported the same scalar keys, else the few non-empty infos) and the caller merges
every worker's payload straight into the batch (`unpack_infos`).
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


Pairs = list[tuple[int, dict[str, Any]]]
# What a worker sends for its envs' infos: None when none reported anything; else
# (positions, table, rows). `table` is a record array with one field per key, row j
# for the env at `positions[j]`, when every env reported the same scalar keys (MuJoCo's
# reward terms, each step); otherwise `rows` holds the (position, info) pairs to merge
# in order (CartPole's few final infos). Either pickles in a few µs, where batched
# columns (object arrays above all) took tens on both ends of the pipe.
Packed = tuple[np.ndarray | None, np.ndarray | None, Pairs] | None


def _scalar_table(pairs: Pairs) -> tuple[np.ndarray, np.ndarray] | None:
    """Positions and a record array of `pairs`, if every info has the same scalar
    keys in the same order and every position is distinct; else None."""
    first = pairs[0][1]
    keys = tuple(first)
    if not all(isinstance(k, str) and k for k in keys):
        return None  # record fields need non-empty str names
    if not all(_is_scalar(v) for v in first.values()):
        return None
    if any(tuple(info) != keys for _, info in pairs[1:]):
        return None
    listed = [p for p, _ in pairs]
    if len(set(listed)) != len(listed):
        return None
    positions = np.array(listed, dtype=np.int64)
    dtype = np.dtype([(k, np.dtype(type(v))) for k, v in first.items()])
    try:
        table = np.array([tuple(info.values()) for _, info in pairs], dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return None  # a later env's value does not fit the first's type
    return positions, table


def pack_infos(rows: Iterable[tuple[int, dict[str, Any]]]) -> Packed:
    """A worker's `(position, info)` pairs, ready to send (see `Packed`)."""
    pairs = [(p, info) for p, info in rows if info]
    if not pairs:
        return None
    table = _scalar_table(pairs)
    if table is not None:
        return table[0], table[1], []
    return None, None, pairs


def unpack_infos(dst: dict[str, Any], packed: Packed, at: np.ndarray, size: int) -> None:
    """Merge a worker's packed infos into `dst`, batched over `size` envs: the env
    at position p of the worker's command goes to row `at[p]`."""
    if packed is None:
        return
    positions, table, rows = packed
    if table is not None and positions is not None:
        where = at[positions]
        for key in table.dtype.names or ():
            column = dst.get(key)
            if column is None:
                column = dst[key] = np.zeros(size, dtype=table.dtype[key])
            column[where] = table[key]
            mask = dst.get(f"_{key}")
            if mask is None:
                mask = dst[f"_{key}"] = np.zeros(size, dtype=np.bool_)
            mask[where] = True
    for p, info in rows:
        add_info(dst, info, int(at[p]), size)
