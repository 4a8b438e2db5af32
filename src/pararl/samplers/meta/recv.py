"""How a sampler takes results back from the vector env: the `recv` policies.

- `WaitAll()`: wait for every env in flight, then one forward pass over all of them
  (fewest, largest forward passes; every worker idles until the slowest is done).
- `Timeout(t)`: block for the first worker, then also take the workers that finish
  within `t` seconds (the parallel-sampling post's "Google-style" partial collection).
- `MinEnvs(k)`: return once at least `k` envs are back; a float in (0, 1) is a
  fraction of all envs.
- `Auto()` (in `samplers.meta.auto`): picks between waiting for all and
  partial collection from running measurements.

`RecvPolicy` is what every one of them answers; `parse_recv` (in
`samplers.meta.sampler`) makes one from text.

A policy's `recv` returns one or more results of `venv.recv`; the sampler records
each and runs one forward pass over all the envs they returned. Every call goes
through `venv.recv`, so every wait is bounded by the vector env's `worker_timeout`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pararl.errors import UsageError
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


class _Fixed:
    """A policy that always calls recv with the same arguments."""

    name = ""

    def _kwargs(self) -> dict[str, Any]:
        return {}

    def begin(self, num_envs: int, worker_of: np.ndarray, forward_cost: ForwardCost) -> None:
        self.num_envs = num_envs

    def recv(self, venv: BatchVectorEnv) -> list[RecvResult]:
        return [venv.recv(**self._kwargs())]

    def after_forward(self, batch: int, seconds: float) -> None:
        pass


@dataclass
class WaitAll(_Fixed):
    name: str = "wait_all"


@dataclass
class Timeout(_Fixed):
    seconds: float = 1e-3
    name: str = ""

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise UsageError(f"recv timeout must be > 0 s, got {self.seconds}")
        self.name = self.name or f"timeout={self.seconds:g}"

    def _kwargs(self) -> dict[str, Any]:
        return {"timeout": self.seconds}


@dataclass
class MinEnvs(_Fixed):
    k: float = 0.5
    name: str = ""

    def __post_init__(self) -> None:
        whole = float(self.k).is_integer() and self.k >= 1
        if not (whole or 0 < self.k < 1):
            raise UsageError(
                f"recv min_envs must be an int >= 1 or a fraction in (0, 1), got {self.k}"
            )
        self.name = self.name or f"min_envs={self.k:g}"

    def _kwargs(self) -> dict[str, Any]:
        k = self.k if self.k >= 1 else max(1.0, round(self.k * self.num_envs))
        return {"min_envs": int(k)}


__all__ = ["ForwardCost", "MinEnvs", "RecvPolicy", "RecvResult", "Timeout", "WaitAll"]
