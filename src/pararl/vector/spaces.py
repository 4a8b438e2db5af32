"""Gymnasium spaces mapped onto shared arrays, and row access by env ids.

A space's *tree* is the nested structure Gymnasium uses for batched values: an
array for Box/Discrete/MultiDiscrete/MultiBinary, a dict for Dict, a tuple for
Tuple. Each leaf is one named array, shaped `[batch, *leaf.shape]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from pararl.mp.shared import ArraySpec

Tree = Any  # np.ndarray | dict[str, Tree] | tuple[Tree, ...]

# --- spaces -> leaves -> trees ------------------------------------------------------


def space_specs(space: spaces.Space, batch: int, prefix: str) -> dict[str, ArraySpec]:
    """One `ArraySpec` per leaf of `space`, batched along a leading axis of `batch`."""
    if isinstance(space, spaces.Dict):
        out: dict[str, ArraySpec] = {}
        for key, sub in space.spaces.items():
            out.update(space_specs(sub, batch, f"{prefix}.{key}"))
        return out
    if isinstance(space, spaces.Tuple):
        out = {}
        for idx, sub in enumerate(space.spaces):
            out.update(space_specs(sub, batch, f"{prefix}.{idx}"))
        return out
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        assert space.dtype is not None
        assert space.shape is not None
        return {prefix: ArraySpec((batch, *space.shape), np.dtype(space.dtype))}
    raise TypeError(
        f"{type(space).__name__} spaces cannot live in shared memory; pararl supports Box, "
        "Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of them. Wrap the env so that "
        "its spaces are of those types (e.g. gymnasium.wrappers.FlattenObservation)."
    )


def space_tree(space: spaces.Space, arrays: dict[str, np.ndarray], prefix: str) -> Tree:
    """The nested structure of `space`, with the named arrays as leaves."""
    if isinstance(space, spaces.Dict):
        return {key: space_tree(sub, arrays, f"{prefix}.{key}") for key, sub in space.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(space_tree(sub, arrays, f"{prefix}.{i}") for i, sub in enumerate(space))
    return arrays[prefix]


def write_row(tree: Tree, index: int, value: Any) -> None:
    """Store one env's value (an unbatched sample of the space) at row `index`."""
    if isinstance(tree, np.ndarray):
        tree[index] = value
    elif isinstance(tree, dict):
        for key, sub in tree.items():
            write_row(sub, index, value[key])
    else:
        for sub, item in zip(tree, value, strict=True):
            write_row(sub, index, item)


def read_row(tree: Tree, index: int) -> Any:
    """One env's value at row `index`, as a private copy (the env may keep it)."""
    if isinstance(tree, np.ndarray):
        return tree[index].copy() if tree.ndim > 1 else tree[index]
    if isinstance(tree, dict):
        return {key: read_row(sub, index) for key, sub in tree.items()}
    return tuple(read_row(sub, index) for sub in tree)


def take_rows(tree: Tree, ids: np.ndarray | slice | None) -> Tree:
    """A copy of rows `ids` (all rows when None), batched like the tree."""
    if isinstance(tree, np.ndarray):
        if ids is None:
            return tree.copy()
        return tree[ids].copy() if isinstance(ids, slice) else tree[ids]
    if isinstance(tree, dict):
        return {key: take_rows(sub, ids) for key, sub in tree.items()}
    return tuple(take_rows(sub, ids) for sub in tree)


def put_rows(tree: Tree, ids: np.ndarray | None, values: Any) -> None:
    """Store batched `values` at rows `ids` (all rows when None)."""
    if isinstance(tree, np.ndarray):
        if ids is None:
            tree[...] = values
        else:
            tree[ids] = values
    elif isinstance(tree, dict):
        for key, sub in tree.items():
            put_rows(sub, ids, values[key])
    else:
        for sub, item in zip(tree, values, strict=True):
            put_rows(sub, ids, item)


def checked_ids(ids: Sequence[int] | np.ndarray | None, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Validated int64 env ids (all of `range(size)` when None), as given and sorted
    (one sort serves the range and uniqueness checks, and grouping by worker)."""
    if ids is None:
        every = np.arange(size)
        return every, every
    arr = np.asarray(ids, dtype=np.int64).reshape(-1)
    ordered = np.sort(arr)
    if ordered.size and (ordered[0] < 0 or ordered[-1] >= size):
        raise IndexError(f"env ids must lie in [0, {size}), got {arr.tolist()}")
    if (ordered[1:] == ordered[:-1]).any():
        raise ValueError(f"env ids must be unique, got {arr.tolist()}")
    return arr, ordered
