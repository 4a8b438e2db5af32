"""Weights to an acting network in this process: the learner's own (nothing to
copy), or a copy of it, e.g. on the CPU while the learner is on a GPU (one
`load_state_dict` per publication). With a delay, the copy acts with the weights of
that many updates ago, as an async actor does (`--acting-lag`)."""

from __future__ import annotations

from collections import deque

import torch
from torch import nn


class LocalCopy:
    """Publishes into `target`, the network that acts; a `WeightSender`. With `delay`
    > 0 (`target` is then a copy), `target` holds the newest publication at least
    `delay` versions (gradient updates) older than the newest one, or the first one
    until there is such."""

    def __init__(self, target: nn.Module, version: int = -1, delay: int = 0) -> None:
        if delay < 0:
            raise ValueError(f"delay must be >= 0, got {delay}")
        self.target, self.delay = target, delay
        self._version = self._newest = version  # the acting weights' and the newest
        self._waiting: deque[tuple[int, dict[str, torch.Tensor]]] = deque()
        self._loaded = False

    @property
    def version(self) -> int:
        """The version `target` acts with."""
        return self._version

    @property
    def newest(self) -> int:
        """The version published last."""
        return self._newest

    def publish(self, model: nn.Module, version: int) -> None:
        self._newest = version
        if self.delay == 0:
            if model is not self.target:  # acting on another copy: bring it up to date
                self.target.load_state_dict(model.state_dict())
            self._version = version
            return
        if model is self.target:
            raise ValueError("a delayed copy needs its own network, not the learner's")
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self._waiting.append((version, state))
        due = self._waiting[0] if not self._loaded else None
        while self._waiting and self._waiting[0][0] <= version - self.delay:
            due = self._waiting.popleft()
        if due is not None:
            self.target.load_state_dict(due[1])
            self._version, self._loaded = due[0], True


__all__ = ["LocalCopy"]
