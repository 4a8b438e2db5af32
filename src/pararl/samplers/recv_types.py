"""The recv-policy interface shared by the fixed policies (`samplers.recv`) and the
measuring one (`samplers.auto`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from pararl.vector.core import BatchVectorEnv

RecvResult = tuple[Any, Any, Any, Any, dict[str, Any], Any]  # venv.recv's 6-tuple
ForwardCost = Callable[[int], float]  # seconds of one forward pass at a batch size


class RecvPolicy(Protocol):
    name: str

    def begin(self, num_envs: int, worker_of: np.ndarray, forward_cost: ForwardCost) -> None:
        """Called once per sample, before the first `send` (`worker_of[e]`: env e's worker)."""

    def recv(self, venv: BatchVectorEnv) -> list[RecvResult]:
        """The results to act on next (at least one env's)."""

    def after_forward(self, batch: int, seconds: float) -> None:
        """The sampler ran a forward pass over `batch` envs in `seconds`."""
