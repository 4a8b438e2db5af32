"""Batching per-env info dicts into Gymnasium's vector layout.

Layout (Gymnasium 1.x): each key maps to an array over the batch, paired with a
boolean mask `_key` saying which envs reported it; nested dicts recurse;
`final_obs` is an object array of unbatched observations.

Workers pack their own envs' infos (`pack_infos`: one record array when every env
reported the same scalar keys, else the few non-empty infos; the final entries of
envs whose episodes ended, in SAME_STEP mode, as one block) and the caller merges
every worker's payload straight into the batch (`unpack_infos`), adding keys in
the order Gymnasium's `_add_info`, env by env, would.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

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


class FinalEntry(dict[str, Any]):
    """The info entry of an env whose episode ended in a SAME_STEP step: Gymnasium's
    `{"final_obs": ..., "final_info": ...}`. The final observation is None when it
    travels through shared memory (the reader fills it in), else the env's own
    object; `pack_infos` sends all of a reply's entries as one block."""

    def __init__(self, final_obs: Any, final_info: dict[str, Any]) -> None:
        super().__init__(final_obs=final_obs, final_info=final_info)


_DTYPES: dict[Any, np.dtype] = {}  # record dtypes by their fields: built once each
_DTYPES_MAX = 256  # infos whose keys keep changing must not grow the cache forever


def _record_dtype(key: Any, fields: Any) -> np.dtype:
    dtype = _DTYPES.get(key)
    if dtype is None:
        if len(_DTYPES) >= _DTYPES_MAX:
            _DTYPES.clear()
        dtype = _DTYPES[key] = np.dtype(list(fields))
    return dtype


Pairs = list[tuple[int, dict[str, Any]]]


class Finals(NamedTuple):
    """The final entries of a reply's envs whose episodes ended (SAME_STEP mode),
    sent as one block."""

    lead: int
    """How many of the reply's other infos come before its first final entry: the
    final keys join the batch at that point."""
    ended: list[int]
    """The positions of the envs that ended (a list: it pickles in a tenth of the
    time an array takes)."""
    infos: Packed | None
    """Their final infos, packed like any infos."""
    observations: list[Any] | None
    """Their final observations: None when all are in the shared array (the reader
    fills them in); else a list with None for those that are."""


class Packed(NamedTuple):
    """What a worker sends for its envs' infos (None when none reported anything).

    `table` or `rows` carries the infos. Either pickles in a few µs, where batched
    columns (object arrays above all) took tens on both ends of the pipe."""

    positions: np.ndarray | None
    """Which env each record of `table` is for: record j is the env at
    `positions[j]` (None: at j)."""
    table: np.ndarray | None
    """Every env's infos as one record array (a field per key), when every env
    reported the same scalar keys (MuJoCo's reward terms, each step)."""
    rows: Pairs
    """Otherwise (irregular infos) the (position, info) pairs to merge, in order."""
    finals: Finals | None
    """The final entries, if any env's episode ended."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Through one module-level function, with the table as its field list and
        # raw bytes and `finals` as a plain tuple: numpy's own pickling of a record
        # array costs several times more on both ends of the pipe, and each class
        # a pickle names by reference adds about 2 µs on each end to every reply.
        # (The table comes back read-only: a view of the received bytes.)
        positions, records, rows, finals = self
        table = None
        if records is not None:
            dtype = records.dtype
            fields = tuple((name, dtype[name].str) for name in dtype.names or ())
            table = (fields, records.tobytes())
        return _unpickle_packed, (positions, table, rows, None if finals is None else tuple(finals))


def _unpickle_packed(
    positions: np.ndarray | None,
    table: tuple[tuple[tuple[str, str], ...], bytes] | None,
    rows: Pairs,
    finals: tuple[Any, ...] | None,
) -> Packed:
    records = None
    if table is not None:
        fields, data = table
        records = np.frombuffer(data, dtype=_record_dtype(fields, fields))
    return Packed(positions, records, rows, None if finals is None else Finals._make(finals))


def _scalar_table(pairs: Pairs) -> tuple[np.ndarray | None, np.ndarray] | None:
    """Positions and a table of `pairs`, if every info has the same scalar keys in
    the same order and every position is distinct; else None."""
    first = pairs[0][1]
    keys = tuple(first)
    if not all(isinstance(k, str) and k for k in keys):
        return None  # record fields need non-empty str names
    if not all(_is_scalar(v) for v in first.values()):
        return None
    if any(tuple(info) != keys for _, info in pairs[1:]):
        return None
    listed = [p for p, _ in pairs]
    positions: np.ndarray | None = None  # the common case: every env, in order
    if listed != list(range(len(listed))):
        if len(set(listed)) != len(listed):
            return None
        positions = np.array(listed, dtype=np.int64)
    types = tuple(type(v) for v in first.values())
    dtype = _record_dtype(
        (keys, types), ((k, np.dtype(t)) for k, t in zip(keys, types, strict=True))
    )
    try:
        table = np.array([tuple(info.values()) for _, info in pairs], dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return None  # a later env's value does not fit the first's type
    return positions, table


def pack_infos(rows: Iterable[tuple[int, dict[str, Any]]]) -> Packed | None:
    """A worker's `(position, info)` pairs, ready to send (see `Packed`)."""
    pairs: Pairs = []
    ended: list[int] = []
    final_infos: list[dict[str, Any]] = []
    final_obs: list[Any] = []
    lead = 0
    for p, info in rows:
        if type(info) is FinalEntry:
            if not ended:
                lead = len(pairs)
            ended.append(p)
            final_infos.append(info["final_info"])
            final_obs.append(info["final_obs"])
        elif info:
            pairs.append((p, info))
    finals: Finals | None = None
    if ended:
        # None: every final observation is in the shared array (the reader fills them
        # in); else the env's own objects, None where one is in the array.
        sent = None if all(o is None for o in final_obs) else final_obs
        finals = Finals(lead, ended, pack_infos(enumerate(final_infos)), sent)
    elif not pairs:
        return None
    table = _scalar_table(pairs) if pairs else None
    if table is not None:
        return Packed(table[0], table[1], [], finals)
    return Packed(None, None, pairs, finals)


def _mask(dst: dict[str, Any], key: str, size: int) -> np.ndarray:
    mask = dst.get(f"_{key}")
    if mask is None:
        mask = dst[f"_{key}"] = np.zeros(size, dtype=np.bool_)
    return mask


def _unpack_table(
    dst: dict[str, Any],
    positions: np.ndarray | None,
    records: np.ndarray,
    at: np.ndarray,
    size: int,
) -> None:
    where = at[: len(records)] if positions is None else at[positions]
    for key in records.dtype.names or ():
        column = dst.get(key)
        if column is None:
            column = dst[key] = np.zeros(size, dtype=records.dtype[key])
        column[where] = records[key]
        _mask(dst, key, size)[where] = True


def _unpack_finals(dst: dict[str, Any], finals: Finals, at: np.ndarray, size: int) -> None:
    where = at[finals.ended]
    column = dst.get("final_obs")
    if column is None:  # None entries: final observations the reader takes from shm
        column = dst["final_obs"] = np.full(size, fill_value=None, dtype=object)
    if finals.observations is not None:
        for row, value in zip(where.tolist(), finals.observations, strict=True):
            column[row] = value  # one by one: an array value must not be broadcast
    _mask(dst, "final_obs", size)[where] = True
    nested = dst.setdefault("final_info", {})
    unpack_infos(nested, finals.infos, where, size)
    _mask(dst, "final_info", size)[where] = True


def unpack_infos(dst: dict[str, Any], packed: Packed | None, at: np.ndarray, size: int) -> None:
    """Merge a worker's packed infos into `dst`, batched over `size` envs: the env
    at position p of the worker's command goes to row `at[p]`."""
    if packed is None:
        return
    positions, table, rows, finals = packed
    # Infos before the first final entry, the final entries, then the rest: the
    # order in which Gymnasium's env-by-env merge adds their keys.
    lead = len(rows) if finals is None else finals.lead
    if table is not None:
        if finals is not None and lead == 0:
            _unpack_finals(dst, finals, at, size)
        _unpack_table(dst, positions, table, at, size)
        if finals is not None and lead > 0:
            _unpack_finals(dst, finals, at, size)
        return
    for p, info in rows[:lead]:
        add_info(dst, info, int(at[p]), size)
    if finals is not None:
        _unpack_finals(dst, finals, at, size)
    for p, info in rows[lead:]:
        add_info(dst, info, int(at[p]), size)
