"""Gymnasium spaces mapped onto batch arrays, and row access by env ids.

A space's *tree* is the nested structure Gymnasium uses for batched values: a
dict for Dict, a tuple for Tuple, and a leaf for everything else. A leaf that fits
shared memory (Box, Discrete, MultiDiscrete, MultiBinary) is an array shaped
`[batch, *leaf.shape]`; any other leaf (Text, Graph, Sequence, OneOf, a custom
space), and every leaf when shared memory is off, is `Pickled`: its values travel
in the worker's reply, the way `gymnasium.vector.AsyncVectorEnv` sends them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from pararl.mp.shared import ArraySpec
from pararl.vector.frame_ring import FrameRing

Tree = Any  # np.ndarray | FrameRing | Pickled | dict[str, Tree] | tuple[Tree, ...]

# Leaf spaces whose batches are plain arrays (Gymnasium's `batch_space` gives a Box
# or MultiDiscrete for each), so they can live in shared memory.
ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class Pickled:
    """A leaf whose values do not live in shared memory: one object per env row.

    A worker stores the values its envs return here and ships those of the rows a
    command touched in its reply (`collect`); the caller keeps the latest value of
    every row and hands out batches as tuples, as Gymnasium batches such spaces.
    """

    __slots__ = ("values",)

    def __init__(self, size: int) -> None:
        self.values: list[Any] = [None] * size


# --- spaces -> leaves -> trees ------------------------------------------------------


def leaf_spaces(space: spaces.Space, prefix: str) -> dict[str, spaces.Space]:
    """Every leaf of `space` by its name (`prefix.key...`), in tree order."""
    if isinstance(space, spaces.Dict):
        out: dict[str, spaces.Space] = {}
        for key, sub in space.spaces.items():
            out.update(leaf_spaces(sub, f"{prefix}.{key}"))
        return out
    if isinstance(space, spaces.Tuple):
        out = {}
        for idx, sub in enumerate(space.spaces):
            out.update(leaf_spaces(sub, f"{prefix}.{idx}"))
        return out
    return {prefix: space}


def shared_memory_refusal(space: spaces.Space) -> type[Exception] | None:
    """The error type Gymnasium's `AsyncVectorEnv(shared_memory=True)` raises for
    `space` (TypeError: a dynamic shape; ValueError: a space it does not know), or
    None where it accepts it. It accepts Text and OneOf, which pararl carries
    pickled: Gymnasium reads them back from shared memory only once, at start."""
    if isinstance(space, (spaces.Dict, spaces.Tuple, spaces.OneOf)):
        subs = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
        return next((e for e in map(shared_memory_refusal, subs) if e is not None), None)
    if isinstance(space, (spaces.Graph, spaces.Sequence)):
        return TypeError
    if isinstance(space, (*ARRAY_SPACES, spaces.Text)):
        return None
    return ValueError


def _shape(leaf: spaces.Space) -> tuple[int, ...]:
    assert leaf.shape is not None  # array spaces have one
    return leaf.shape


def space_specs(
    space: spaces.Space, batch: int, prefix: str, share: bool = True
) -> dict[str, ArraySpec]:
    """One `ArraySpec` per leaf of `space` that goes into shared memory (none when
    `share` is False), batched along a leading axis of `batch`."""
    if not share:
        return {}
    return {
        name: ArraySpec((batch, *_shape(leaf)), np.dtype(leaf.dtype))
        for name, leaf in leaf_spaces(space, prefix).items()
        if isinstance(leaf, ARRAY_SPACES)
    }


def unshared_leaves(
    space: spaces.Space, batch: int, prefix: str, arrays: dict[str, Any], local: bool
) -> dict[str, np.ndarray | Pickled]:
    """Holders for the leaves of `space` missing from `arrays`: `Pickled` in a worker;
    in the caller (`local`), a private array for array leaves (values arrive pickled
    and are batched as arrays, as Gymnasium's `shared_memory=False` does)."""
    holders: dict[str, np.ndarray | Pickled] = {}
    for name, leaf in leaf_spaces(space, prefix).items():
        if name in arrays:
            continue
        if local and isinstance(leaf, ARRAY_SPACES):
            holders[name] = np.zeros((batch, *_shape(leaf)), dtype=leaf.dtype)
        else:
            holders[name] = Pickled(batch)
    return holders


def space_tree(space: spaces.Space, arrays: dict[str, Any], prefix: str) -> Tree:
    """The nested structure of `space`, with the named leaves of `arrays` as leaves."""
    if isinstance(space, spaces.Dict):
        return {key: space_tree(sub, arrays, f"{prefix}.{key}") for key, sub in space.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(space_tree(sub, arrays, f"{prefix}.{i}") for i, sub in enumerate(space))
    return arrays[prefix]


# --- rows ---------------------------------------------------------------------------


def write_row(tree: Tree, index: int, value: Any) -> None:
    """Store one env's value (an unbatched sample of the space) at row `index`."""
    if isinstance(tree, np.ndarray):
        tree[index] = value
    elif isinstance(tree, Pickled):
        tree.values[index] = value
    elif isinstance(tree, dict):
        for key, sub in tree.items():
            write_row(sub, index, value[key])
    else:
        for sub, item in zip(tree, value, strict=True):
            write_row(sub, index, item)


def take_rows(tree: Tree, ids: np.ndarray | slice | None) -> Tree:
    """A copy of rows `ids` (all rows when None), batched like the tree."""
    if isinstance(tree, FrameRing):
        return tree.take(ids)
    if isinstance(tree, np.ndarray):
        if ids is None:
            return tree.copy()
        return tree[ids].copy() if isinstance(ids, slice) else tree[ids]
    if isinstance(tree, Pickled):
        if ids is None:
            return tuple(tree.values)
        if isinstance(ids, slice):
            return tuple(tree.values[ids])
        return tuple(tree.values[i] for i in ids.tolist())
    if isinstance(tree, dict):
        return {key: take_rows(sub, ids) for key, sub in tree.items()}
    return tuple(take_rows(sub, ids) for sub in tree)


def view_rows(tree: Tree) -> Tree:
    """All rows with no copy: the arrays themselves (later calls overwrite them, as
    with Gymnasium's `copy=False`), pickled leaves as tuples."""
    if isinstance(tree, np.ndarray):
        return tree
    if isinstance(tree, FrameRing):
        return tree.take(None)  # stacks are assembled when read, never views
    if isinstance(tree, Pickled):
        return tuple(tree.values)
    if isinstance(tree, dict):
        return {key: view_rows(sub) for key, sub in tree.items()}
    return tuple(view_rows(sub) for sub in tree)


def collect(leaves: Sequence[Pickled], rows: slice | Sequence[int]) -> list[list[Any]]:
    """The values of rows `rows` of each pickled leaf, leaf by leaf."""
    if isinstance(rows, slice):
        return [leaf.values[rows] for leaf in leaves]
    return [[leaf.values[r] for r in rows] for leaf in leaves]


def deliver(
    leaves: Sequence[np.ndarray | Pickled], rows: np.ndarray, values: list[list[Any]]
) -> None:
    """Store what `collect` shipped for `rows` into the caller's holders, in order."""
    for leaf, column in zip(leaves, values, strict=True):
        if isinstance(leaf, Pickled):
            for row, value in zip(rows.tolist(), column, strict=True):
                leaf.values[row] = value
        else:
            leaf[rows] = column


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
