"""Packed infos (worker side) merged into the batch (caller side) give exactly the
layout Gymnasium's own `VectorEnv._add_info` builds, env by env."""

from __future__ import annotations

import pickle
import pickletools
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from pararl.vector import infos
from pararl.vector.infos import FinalEntry, pack_infos, unpack_infos

Pairs = list[tuple[int, dict[str, Any]]]


def reference(pairs: Pairs, size: int) -> dict[str, Any]:
    """Gymnasium's batching: `_add_info` once per (env, info), in order, on a
    stand-in that has what the method reads (`num_envs`, itself for nested dicts)."""
    add = gym.vector.VectorEnv._add_info
    stand_in: Any = SimpleNamespace(num_envs=size)
    stand_in._add_info = lambda d, i, n: add(stand_in, d, i, n)
    batched: dict[str, Any] = {}
    for env, info in pairs:
        batched = add(stand_in, batched, info, env)
    return batched


def merged(workers: list[tuple[Pairs, np.ndarray]], size: int) -> dict[str, Any]:
    """Pack each worker's pairs (positions within its command), send them through
    pickle as a reply would, and merge at the batch rows `at`."""
    out: dict[str, Any] = {}
    for pairs, at in workers:
        packed = pickle.loads(pickle.dumps(pack_infos(pairs)))
        unpack_infos(out, packed, at, size)
    return out


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert list(got) == list(want)
    for key, value in want.items():
        if isinstance(value, dict):
            assert_same(got[key], value)
            continue
        assert got[key].dtype == value.dtype, key
        assert got[key].shape == value.shape, key
        if value.dtype == object:
            for a, b in zip(got[key], value, strict=True):
                assert type(a) is type(b), key
                assert np.array_equal(a, b), key
        else:
            np.testing.assert_array_equal(got[key], value, err_msg=key)


def uniform(positions: list[int]) -> Pairs:
    """Every env reports the same scalar keys (MuJoCo-like reward terms)."""
    return [
        (
            p,
            {
                "x": float(p) / 3,
                "steps": p * 7,
                "alive": p % 2 == 0,
                "cost": np.float32(p) / 2,
                "big": np.int64(2**62 + p),
            },
        )
        for p in positions
    ]


def test_uniform_scalars_go_as_one_table_and_match_gymnasium() -> None:
    pairs = uniform([0, 1, 3, 4])
    packed = pack_infos(pairs)
    assert packed is not None
    assert packed.table is not None
    assert not packed.rows
    assert_same(merged([(pairs, np.arange(6))], 6), reference(pairs, 6))


def test_a_table_of_every_env_in_order_sends_no_positions() -> None:
    pairs = uniform([0, 1, 2])
    packed = pack_infos(pairs)
    assert packed is not None
    assert packed.positions is None
    at = np.array([4, 5, 6])  # the command's envs sit at rows 4-6 of the batch
    want = reference([(int(at[p]), info) for p, info in pairs], 7)
    assert_same(merged([(pairs, at)], 7), want)


def test_irregular_infos_go_as_rows_and_match_gymnasium() -> None:
    pairs: Pairs = [
        (0, {"t": 1, "hist": np.array([1, 2], np.int16)}),
        (2, {"t": 2, "why": "terminated", "detail": {"r": 0.5, "code": np.int64(9)}}),
        (3, {"final_obs": np.ones(3), "final_info": {"t": 4}}),
        (3, {"start": np.float32(0.25)}),  # the same env again: its reset info
    ]
    packed = pack_infos(pairs)
    assert packed is not None
    assert packed.table is None
    assert_same(merged([(pairs, np.arange(5))], 5), reference(pairs, 5))


@pytest.mark.parametrize(
    "pairs",
    [
        [(0, {"a": 1.0}), (1, {"a": 2.0, "b": 1})],  # keys differ
        [(0, {"a": 1.0, "b": 2}), (1, {"b": 2, "a": 1.0})],  # key order differs
        [(0, {"a": 1.0}), (0, {"a": 2.0})],  # one env twice
        [(0, {"": 1.0}), (1, {"": 2.0})],  # not a record field name
        [(0, {1: 1.0}), (1, {1: 2.0})],
        [(0, {"a": 1}), (1, {"a": 2**70})],  # does not fit the first's type
    ],
)
def test_what_a_table_cannot_hold_goes_as_rows(pairs: Pairs) -> None:
    packed = pack_infos(pairs)
    assert packed is not None
    assert packed.table is None
    if pairs[1][1].get("a") == 2**70:
        return  # Gymnasium itself fails on this one (int64 overflow)
    assert_same(merged([(pairs, np.arange(3))], 3), reference(pairs, 3))


def test_workers_merge_at_their_rows_like_one_batch() -> None:
    """Two workers' replies (positions within each command) land at their rows;
    one sent a table, the other rows; empty infos are dropped."""
    first = uniform([0, 1])
    second: Pairs = [(0, {}), (1, {"x": 9.5, "extra": "yes"})]
    at_first, at_second = np.array([1, 4]), np.array([0, 2])
    want = reference(
        [(int(at_first[p]), i) for p, i in first]
        + [(int(at_second[p]), i) for p, i in second if i],
        5,
    )
    assert_same(merged([(first, at_first), (second, at_second)], 5), want)


def test_nothing_to_send_is_none() -> None:
    assert pack_infos([]) is None
    assert pack_infos([(0, {}), (1, {})]) is None
    out: dict[str, Any] = {}
    unpack_infos(out, None, np.arange(2), 2)
    assert out == {}


def final(info: dict[str, Any]) -> FinalEntry:
    """An ended env's entry, with the placeholder a SAME_STEP batch puts in it."""
    return FinalEntry(None, info)


@pytest.mark.parametrize(
    "pairs",
    [
        # CartPole: nothing but final entries with empty final infos
        [(1, final({})), (4, final({}))],
        # MuJoCo: uniform step infos, uniform final infos, the first env ends
        [(0, final({"x": 1.0, "n": 2})), *uniform([0, 1, 2]), (2, final({"x": 0.5, "n": 3}))],
        # ... or a later one: the step infos' keys come first
        [*uniform([0, 1]), (1, final({"x": 1.0})), *uniform([2, 3])],
        # irregular infos around the finals, with reset infos after them
        [
            (0, {"t": 1}),
            (1, final({"why": "truncated", "detail": {"r": 0.5}})),
            (1, {"start": np.float32(0.25)}),
            (3, final({})),
            (3, {"start": np.float32(0.5), "late": "yes"}),
        ],
        [(0, final({"t": 2})), (0, {"start": 1.0}), (2, {"t": 3})],
    ],
    ids=["empty", "table-final-first", "table-final-later", "rows-around", "rows-final-first"],
)
def test_final_entries_go_as_one_block_and_match_gymnasium(pairs: Pairs) -> None:
    packed = pack_infos(pairs)
    assert packed is not None
    finals = packed.finals
    assert finals is not None
    ended = [p for p, info in pairs if isinstance(info, FinalEntry)]
    assert finals.ended == ended
    assert not any(isinstance(info, FinalEntry) for _, info in packed.rows)
    assert_same(merged([(pairs, np.arange(5))], 5), reference(pairs, 5))
    # A reply merged after another worker's: keys already there keep their place.
    other = [(0, final({"x": 9.0})), *uniform([1])]
    want = reference([*other, *((p + 2, i) for p, i in pairs)], 7)
    assert_same(merged([(other, np.arange(2)), (pairs, np.arange(2, 7))], 7), want)


def test_record_dtypes_are_cached_but_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Infos whose keys change every step (a step counter in the key, say) still
    merge correctly and do not grow the dtype cache without bound."""
    monkeypatch.setattr(infos, "_DTYPES_MAX", 4)
    monkeypatch.setattr(infos, "_DTYPES", {})
    for step in range(10):
        pairs: Pairs = [(p, {f"k{step}": float(p)}) for p in range(3)]
        assert_same(merged([(pairs, np.arange(3))], 3), reference(pairs, 3))
        assert len(infos._DTYPES) <= 4


def test_packed_infos_cross_a_pipe_as_the_same_named_records() -> None:
    """A table with a final entry, after pickling, is still a `Packed` holding a
    `Finals`, field for field; the pickle names one function, and no class."""
    pairs = [(0, final({"x": 1.0})), *uniform([0, 1, 2])]
    packed = pack_infos(pairs)
    assert packed is not None
    assert packed.finals is not None
    data = pickle.dumps(packed)
    back = pickle.loads(data)
    assert type(back) is infos.Packed
    assert type(back.finals) is infos.Finals
    assert back.positions is None
    assert back.rows == []
    assert back.table is not None
    assert packed.table is not None
    assert back.table.dtype == packed.table.dtype
    np.testing.assert_array_equal(back.table, packed.table)
    assert back.finals.lead == packed.finals.lead == 0
    assert back.finals.ended == [0]
    assert back.finals.observations is None
    assert back.finals.infos is not None
    assert packed.finals.infos is not None
    np.testing.assert_array_equal(back.finals.infos.table, packed.finals.infos.table)
    names = [arg for op, arg, _ in pickletools.genops(data) if op.name == "SHORT_BINUNICODE"]
    assert names.count("_unpickle_packed") == 1
    assert not {"Packed", "Finals"} & set(names)
