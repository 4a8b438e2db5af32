"""Arrays in shared memory, allocated once from an example, and Gymnasium spaces
mapped onto them.

`SharedArrays` holds several named numpy arrays in one anonymous shared-memory
block. The block is created by `multiprocessing` (`RawArray`): its backing file is
unlinked as soon as it is mapped, so nothing is ever left in `/dev/shm`, whatever
happens to the processes; the memory is freed when the last process holding it
exits. It is handed to children when they start (all start methods) and viewed as
numpy arrays on each side with no copy.

A space's *tree* is the nested structure Gymnasium uses for batched values: an
array for Box/Discrete/MultiDiscrete/MultiBinary, a dict for Dict, a tuple for
Tuple. Each leaf is one named array, shaped `[batch, *leaf.shape]`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any

import numpy as np
from gymnasium import spaces

Tree = Any  # np.ndarray | dict[str, Tree] | tuple[Tree, ...]
_ALIGN = 64  # one cache line: workers writing neighbouring arrays do not share lines


@dataclass(frozen=True)
class ArraySpec:
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _offsets(specs: dict[str, ArraySpec]) -> tuple[dict[str, int], int]:
    offsets, total = {}, 0
    for name, spec in specs.items():
        offsets[name] = total
        total += -(-spec.nbytes // _ALIGN) * _ALIGN
    return offsets, max(total, _ALIGN)


class SharedArrays:
    """Named arrays in one shared-memory block; picklable to child processes at start."""

    def __init__(self, specs: dict[str, ArraySpec], ctx: BaseContext) -> None:
        self.specs = dict(specs)
        self._offsets, self.nbytes = _offsets(self.specs)
        self._raw = ctx.RawArray(ctypes.c_uint8, self.nbytes)
        self._views: dict[str, np.ndarray] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "specs": self.specs,
            "_offsets": self._offsets,
            "nbytes": self.nbytes,
            "_raw": self._raw,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._views = None

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        if self._views is None:
            raw = memoryview(self._raw).cast("B")
            block = np.frombuffer(raw, dtype=np.uint8, count=self.nbytes)
            self._views = {
                name: block[off : off + spec.nbytes].view(spec.dtype).reshape(spec.shape)
                for (name, spec), off in zip(
                    self.specs.items(), self._offsets.values(), strict=True
                )
            }
        return self._views


def local_arrays(specs: dict[str, ArraySpec]) -> dict[str, np.ndarray]:
    """Ordinary (process-local) arrays with the same specs: the serial twin's storage."""
    return {name: np.zeros(spec.shape, spec.dtype) for name, spec in specs.items()}


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
