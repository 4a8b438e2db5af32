"""Weights to Ray actors through the object store.

`publish` only records the newest version; the first request sent after it puts the
weights into the object store (`refs`: one `ray.put` per version sent, however many
actors, and none for versions no request carried). Each request carries that
reference wrapped in a list, so Ray does not fetch it for an actor that already has
the version: the actor's `RayReceiver` fetches it (`ray.get`, once per node from the
object store) only when the version is new. Weights travel as numpy arrays: the
object store passes them without pickling tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from pararl.weights.base import load_numpy_state, numpy_state


class RayWeights:
    """The driver's side; `put` is `ray.put`. A `WeightSender`."""

    def __init__(self, put: Callable[[Any], Any]) -> None:
        self._put = put
        self._version = -1
        self._model: nn.Module | None = None  # the newest version, snapshot when sent
        self._ref: Any = None
        self._ref_version = -2

    @property
    def version(self) -> int:
        return self._version

    def publish(self, model: nn.Module, version: int) -> None:
        self._model, self._version = model, version

    def refs(self) -> list[Any]:
        """What a request carries: the newest version's object reference, in a list."""
        if self._ref_version != self._version:
            assert self._model is not None, "publish weights before the first request"
            self._ref = self._put(numpy_state(self._model))
            self._ref_version = self._version
        return [self._ref]


class RayReceiver:
    """A Ray actor's side: loads a request's weights when their version is new."""

    def __init__(self) -> None:
        self.version = -1  # the version loaded last

    def refresh(self, model: nn.Module, refs: list[Any], version: int) -> None:
        if version != self.version:
            import ray

            load_numpy_state(model, ray.get(refs[0]))
            self.version = version


__all__ = ["RayReceiver", "RayWeights"]
