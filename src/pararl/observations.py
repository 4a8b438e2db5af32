"""Observations the multi-input encoder reads: Dict and Tuple ones, their leaves, what
each leaf is, and batches of them; and bare Discrete and MultiDiscrete ones.

A Dict or Tuple observation space is a tree, batched as Gymnasium batches it (a dict
for Dict, a tuple for Tuple, an array `[B, ...]` at each leaf). pararl names each leaf
by its path (`image`, `state.pos`, `0`) and keeps such observations as one array per
leaf, `{name: [N, *leaf.shape]}`: rollouts and replay memories store them so, a
minibatch indexes each, and the multi-input encoder (`models.multi`) reads them so.
`flat` turns what an env gives (nested dicts and tuples) into that form and leaves it
as it is, so every caller may hand either.

A bare Discrete or MultiDiscrete observation (Taxi's and FrozenLake's state index) is
one discrete leaf, named `WHOLE` (""): the encoder reads it one-hot as it reads such a
leaf of a Dict, while everything that stores observations keeps it as the one int64
array it is (`stored` leaves none of it), as it keeps a Box's; `flat` of a bare array
is that leaf.

A leaf is one of three kinds, each read its own way by the encoder:
- `image`: a uint8 or bool Box of rank 3 (`images.is_image`), stored in its dtype
  and read by the CNN of its size;
- `vector`: any other Box, and MultiBinary: stored as float32 (MultiBinary in its
  own dtype) and flattened; the only leaves observation normalisation applies to;
- `discrete`: Discrete and MultiDiscrete, stored as int64 and read one-hot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from pararl.errors import UsageError
from pararl.images import is_image

LeafKind = Literal["image", "vector", "discrete"]
FLOAT32 = np.dtype(np.float32)
WHOLE = ""  # the name of the one leaf a bare Discrete or MultiDiscrete observation is


@dataclass(frozen=True)
class Leaf:
    """One leaf of a Dict or Tuple observation: its path, kind, shape of one
    observation, the dtype it is stored in, and for a discrete leaf how many values
    each entry takes from which lowest value (its one-hot widths and offsets)."""

    name: str
    kind: LeafKind
    shape: tuple[int, ...]
    dtype: np.dtype
    classes: tuple[int, ...] = ()
    start: tuple[int, ...] = ()

    @property
    def size(self) -> int:
        """The floats it gives the encoder before any CNN: the flattened vector, or
        the one-hot widths together (an image's depend on its CNN)."""
        if self.kind == "discrete":
            return sum(self.classes)
        return int(np.prod(self.shape, dtype=np.int64))

    def describe(self) -> str:
        """`image 3x16x16 uint8`, `pos (4,) float32`, `mode 3 values`
        (`observation 500 values`: a bare Discrete observation)."""
        name = self.name or "observation"
        if self.kind == "image":
            return f"{name} {'x'.join(map(str, self.shape))} {self.dtype.name}"
        if self.kind == "discrete":
            return f"{name} {'+'.join(map(str, self.classes))} values"
        return f"{name} {self.shape} {self.dtype.name}"

    def as_dict(self) -> dict[str, Any]:
        """The leaf in the forms a checkpoint holds (`from_dict` reads it back)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "shape": list(self.shape),
            "dtype": self.dtype.str,
            "classes": list(self.classes),
            "start": list(self.start),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Leaf:
        return cls(
            str(d["name"]),
            d["kind"],
            tuple(int(x) for x in d["shape"]),
            np.dtype(d["dtype"]),
            tuple(int(x) for x in d["classes"]),
            tuple(int(x) for x in d["start"]),
        )


def is_structured(space: gym.Space) -> bool:
    """A Dict or Tuple space: observations stored one array per leaf."""
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def is_discrete(space: gym.Space) -> bool:
    """A bare Discrete or MultiDiscrete space: one discrete leaf, stored as one array."""
    return isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))


def encoded(space: gym.Space) -> tuple[Leaf, ...]:
    """What the multi-input encoder reads of `space`: the leaves of a Dict or Tuple,
    the one `WHOLE` leaf of a bare Discrete or MultiDiscrete space; none for a Box
    (read by an MLP or a CNN as it is)."""
    if is_structured(space) or is_discrete(space):
        return leaves(space)
    return ()


def stored(specs: Sequence[Leaf]) -> tuple[Leaf, ...]:
    """The leaves kept as one array each in rollouts, n-step records, actors'
    outboxes and replay memories: a Dict's or Tuple's; none for a bare discrete
    observation (kept as one array, as the vector env gives it)."""
    return tuple(leaf for leaf in specs if leaf.name != WHOLE)


def _children(space: gym.Space) -> list[tuple[str, gym.Space]]:
    if isinstance(space, gym.spaces.Dict):
        return [(str(key), sub) for key, sub in space.spaces.items()]
    assert isinstance(space, gym.spaces.Tuple)
    return [(str(i), sub) for i, sub in enumerate(space.spaces)]


def _leaf(name: str, space: gym.Space) -> Leaf:
    if isinstance(space, gym.spaces.Box):
        shape = tuple(space.shape)
        if is_image(space):
            return Leaf(name, "image", shape, np.dtype(space.dtype))
        return Leaf(name, "vector", shape, FLOAT32)
    if isinstance(space, gym.spaces.MultiBinary):
        return Leaf(name, "vector", tuple(space.shape), np.dtype(space.dtype))
    if isinstance(space, gym.spaces.Discrete):
        return Leaf(name, "discrete", (), np.dtype(np.int64), (int(space.n),), (int(space.start),))
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec, start = space.nvec.ravel(), space.start.ravel()
        classes = tuple(int(n) for n in nvec)
        starts = tuple(int(x) for x in start)
        return Leaf(name, "discrete", tuple(space.shape), np.dtype(np.int64), classes, starts)
    raise UsageError(
        f"observation leaf '{name}' is {space}: the multi-input encoder reads Box, "
        "Discrete, MultiDiscrete and MultiBinary leaves; wrap the env so that it gives those"
    )


def leaves(space: gym.Space, prefix: str = "") -> tuple[Leaf, ...]:
    """Every leaf of a Dict or Tuple space, in its order (nested ones by their
    path), or the `WHOLE` leaf of a bare Discrete or MultiDiscrete space; a
    UsageError for a leaf the encoder cannot read, an empty space, or a key "" at the
    top (`WHOLE`, the name of a whole observation)."""
    if is_discrete(space) and not prefix:
        return (_leaf(WHOLE, space),)
    found: list[Leaf] = []
    for key, sub in _children(space):
        if key == WHOLE and not prefix:
            raise UsageError(f"the observation space {space} has a key '': give each key a name")
        name = f"{prefix}.{key}" if prefix else key
        found += leaves(sub, name) if is_structured(sub) else [_leaf(name, sub)]
    if not found and not prefix:
        raise UsageError(f"the observation space {space} has no leaves to learn from")
    return tuple(found)


def flat(obs: Any, prefix: str = "") -> dict[str, Any]:
    """A structured observation (or batch) as `{leaf name: value}`: nested dicts and
    tuples by their paths; a dict of leaves is given back as it is; anything else
    (a bare discrete observation, or a batch of them) is the `WHOLE` leaf."""
    if not is_tree(obs):
        return {WHOLE: obs}
    items = obs.items() if isinstance(obs, Mapping) else enumerate(obs)
    out: dict[str, Any] = {}
    for key, value in items:
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, (Mapping, tuple)):
            out.update(flat(value, name))
        else:
            out[name] = value
    return out


def is_tree(obs: Any) -> bool:
    """Whether `obs` is a structured observation (a dict or tuple of leaves) rather
    than one array."""
    return isinstance(obs, (Mapping, tuple))


def map_leaves(fn: Callable[[Any], Any], obs: Any) -> Any:
    """`fn` of an array, or of each leaf of a structured observation (then a dict of
    leaves by name)."""
    if is_tree(obs):
        return {name: fn(value) for name, value in flat(obs).items()}
    return fn(obs)


def take(obs: Any, index: Any) -> Any:
    """Rows `index` of a batch: of its array, or of each of its leaves."""
    return map_leaves(lambda a: a[index], obs)


def put(store: Any, index: Any, obs: Any) -> None:
    """Write a batch (or one observation) into rows `index` of `store`: an array, or
    a dict of arrays by leaf name (`zeros`)."""
    if not isinstance(store, dict):
        store[index] = obs
        return
    given = flat(obs)
    for name, array in store.items():
        array[index] = given[name]


def concat(parts: Sequence[Any]) -> Any:
    """Batches end to end: arrays, or dicts of leaves leaf by leaf."""
    return joined(parts) if is_tree(parts[0]) else np.concatenate(parts)


def row_bytes(specs: Sequence[Leaf]) -> int:
    """The bytes of one observation stored leaf by leaf."""
    return sum(int(np.prod(leaf.shape, dtype=np.int64)) * leaf.dtype.itemsize for leaf in specs)


def batch_size(obs: Any) -> int:
    """How many observations a batch holds (one array, or leaves)."""
    return len(next(iter(flat(obs).values()))) if is_tree(obs) else len(obs)


def zeros(specs: Sequence[Leaf], leading: tuple[int, ...]) -> dict[str, np.ndarray]:
    """One zeroed array per leaf, shaped `[*leading, *leaf.shape]` in its dtype."""
    return {leaf.name: np.zeros((*leading, *leaf.shape), leaf.dtype) for leaf in specs}


def stacked(items: Sequence[Any]) -> dict[str, np.ndarray]:
    """Single structured observations (as envs give them) stacked into a batch."""
    rows = [flat(item) for item in items]
    return {name: np.stack([np.asarray(row[name]) for row in rows]) for name in rows[0]}


def joined(batches: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Batches of leaves concatenated along their first axis."""
    return {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}


def vector_part(obs: Mapping[str, np.ndarray], specs: Sequence[Leaf]) -> np.ndarray:
    """The vector leaves of a batch `[N, ...]`, flattened and side by side `[N, D]`
    in leaf order: what observation normalisation sees (`models.normalize`)."""
    parts = [
        np.asarray(obs[leaf.name]).reshape(len(obs[leaf.name]), -1)
        for leaf in specs
        if leaf.kind == "vector"
    ]
    n = batch_size(obs)
    return np.concatenate(parts, axis=1) if parts else np.zeros((n, 0), FLOAT32)


def as_batch(obs: Any, specs: Sequence[Leaf]) -> tuple[dict[str, np.ndarray], bool]:
    """A structured observation, or a batch of them, as one batch of leaves in their
    stored dtypes (a bare discrete one: its `WHOLE` leaf); True when it was one
    observation. A UsageError when its leaves are not the space's."""
    given = flat(obs)
    names = [leaf.name for leaf in specs]
    if sorted(given) != sorted(names):
        if names == [WHOLE]:
            raise UsageError(
                f"an observation with leaves {sorted(given)}: this agent takes one "
                f"{specs[0].describe()} (an int or array as the env gives it, or a batch)"
            )
        raise UsageError(
            f"an observation with leaves {sorted(given) if is_tree(obs) else type(obs).__name__}"
            f": this agent takes {names} (a dict or tuple as the env gives it, or a batch "
            "of them)"
        )
    arrays = {leaf.name: np.asarray(given[leaf.name], leaf.dtype) for leaf in specs}
    single = all(arrays[leaf.name].shape == leaf.shape for leaf in specs)
    if single:
        return {name: a[None] for name, a in arrays.items()}, True
    sizes = {a.shape[0] if a.ndim else -1 for a in arrays.values()}
    shaped = all(arrays[leaf.name].shape[1:] == leaf.shape for leaf in specs)
    if len(sizes) != 1 or not shaped:
        shapes = {name: a.shape for name, a in arrays.items()}
        want = {leaf.name: leaf.shape for leaf in specs}
        raise UsageError(
            f"observation leaves of shapes {shapes}: this agent takes {want}, or a batch "
            "(N, ...) of each with one N"
        )
    return arrays, False


__all__ = [
    "WHOLE",
    "Leaf",
    "LeafKind",
    "as_batch",
    "batch_size",
    "concat",
    "encoded",
    "flat",
    "is_discrete",
    "is_structured",
    "is_tree",
    "joined",
    "leaves",
    "map_leaves",
    "put",
    "row_bytes",
    "stacked",
    "stored",
    "take",
    "vector_part",
    "zeros",
]
