"""Weights to an acting network in this process: the learner's own (nothing to
copy), or a copy of it, e.g. on the CPU while the learner is on a GPU (one
`load_state_dict` per publication)."""

from __future__ import annotations

from torch import nn


class LocalCopy:
    """Publishes into `target`, the network that acts; a `WeightSender`."""

    def __init__(self, target: nn.Module, version: int = -1) -> None:
        self.target, self._version = target, version

    @property
    def version(self) -> int:
        return self._version

    def publish(self, model: nn.Module, version: int) -> None:
        if model is not self.target:  # acting on another copy: bring it up to date
            self.target.load_state_dict(model.state_dict())
        self._version = version


__all__ = ["LocalCopy"]
