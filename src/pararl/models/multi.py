"""The multi-input encoder: Dict and Tuple observations (`pararl.observations`) read
key by key into one feature vector, which the heads of a Q-network or an actor-critic
take as they take a flat observation (`--model multi-input`, what `auto` picks for
such spaces, and for bare Discrete and MultiDiscrete ones: a single discrete leaf,
given as one array).

Each leaf is read by what it is, as SB3's `CombinedExtractor` reads a Dict:
- an image: the CNN of its size (`images.image_model`: the Nature CNN from 36 pixels
  a side, the MinAtar CNN below), one per image leaf, in the env's dtype and layout
  (`models.cnn`);
- vectors: flattened as float32, every vector leaf side by side, then normalised as
  one vector when observation normalisation is on (`models.normalize`; images and
  one-hot values never are);
- discrete values: one-hot, each entry of a MultiDiscrete its own.

The features are the image trunks' outputs (in leaf order), then the vectors, then
the one-hot values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - torch's own name for it

from pararl.images import image_model
from pararl.models.cnn import image_trunk
from pararl.models.networks import Encoder
from pararl.observations import Leaf, flat, vector_part


class OneHot(nn.Module):
    """A discrete leaf's values `[B, *shape]` (ints) -> their one-hot codes side by
    side `[B, sum(classes)]`, each entry offset by its lowest value."""

    start: torch.Tensor

    def __init__(self, leaf: Leaf) -> None:
        super().__init__()
        self.classes = leaf.classes
        self.register_buffer("start", torch.tensor(leaf.start, dtype=torch.long))

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        x = values.reshape(len(values), -1).long() - self.start
        if len(set(self.classes)) == 1:  # one width: one call
            return F.one_hot(x, self.classes[0]).flatten(1).float()
        codes = [F.one_hot(x[:, i], n) for i, n in enumerate(self.classes)]
        return torch.cat(codes, dim=1).float()


class MultiInputEncoder(Encoder):
    """See the module docstring. `normalized`: how many of the features observation
    normalisation sees (the vector leaves, flattened)."""

    def __init__(self, leaves: Sequence[Leaf]) -> None:
        super().__init__()
        self.leaves = tuple(leaves)
        self.image_names = [leaf.name for leaf in leaves if leaf.kind == "image"]
        self.vector_names = [leaf.name for leaf in leaves if leaf.kind == "vector"]
        self.discrete_names = [leaf.name for leaf in leaves if leaf.kind == "discrete"]
        by_name = {leaf.name: leaf for leaf in leaves}
        # lists, not dicts of modules: a leaf's path may hold a '.', which a module's
        # name may not
        self.models = [image_model(by_name[n].shape, by_name[n].dtype) for n in self.image_names]
        trunks = [
            image_trunk(model, by_name[n].shape, by_name[n].dtype)
            for model, n in zip(self.models, self.image_names, strict=True)
        ]
        self.trunks = nn.ModuleList(trunks)
        self.image_features = [trunk.features for trunk in trunks]
        self.one_hots = nn.ModuleList(OneHot(by_name[n]) for n in self.discrete_names)
        self.normalized = sum(by_name[n].size for n in self.vector_names)
        self.features = (
            sum(self.image_features)
            + self.normalized
            + sum(by_name[n].size for n in self.discrete_names)
        )

    def forward(
        self, obs: Any, normalize: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Observations (a dict of leaves by name, the env's nested dicts and tuples,
        or the one array of a bare discrete observation) -> features `[B, features]`;
        `normalize` takes the vector leaves side by side."""
        x = flat(obs)
        parts = [trunk(x[name]) for trunk, name in zip(self.trunks, self.image_names, strict=True)]
        if self.vector_names:
            vectors = torch.cat([x[n].flatten(1).float() for n in self.vector_names], dim=1)
            parts.append(normalize(vectors) if normalize is not None else vectors)
        parts += [code(x[n]) for code, n in zip(self.one_hots, self.discrete_names, strict=True)]
        return torch.cat(parts, dim=1)

    def vector_part(self, obs: Any) -> np.ndarray:
        """The vector leaves of a batch (numpy), side by side: what normalisation's
        statistics are made from."""
        return vector_part(flat(obs), self.leaves)

    def describe(self) -> str:
        """What reads each leaf, for the start-up line."""
        images = zip(self.image_names, self.models, self.image_features, strict=True)
        reads = {name: f"{model} ({features})" for name, model, features in images}
        for leaf in self.leaves:
            if leaf.kind != "image":
                what = "one-hot" if leaf.kind == "discrete" else "flattened"
                reads[leaf.name] = f"{what} ({leaf.size})"
        parts = [f"{leaf.describe()} -> {reads[leaf.name]}" for leaf in self.leaves]
        return f"{'; '.join(parts)}: {self.features} features"


__all__ = ["MultiInputEncoder", "OneHot"]
