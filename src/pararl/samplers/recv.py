"""How a sampler takes results back from the vector env: the `recv` policies.

- `WaitAll()`: wait for every env in flight, then one forward pass over all of them
  (fewest, largest forward passes; every worker idles until the slowest is done).
- `Timeout(t)`: block for the first worker, then also take the workers that finish
  within `t` seconds (seeds/001's "Google-style" partial collection).
- `MinEnvs(k)`: return once at least `k` envs are back; a float in (0, 1) is a
  fraction of all envs.
- `Auto()` (in `pararl.samplers.auto`): picks between waiting for all and
  partial collection from running measurements.

A policy's `recv` returns one or more results of `venv.recv`; the sampler records
each and runs one forward pass over all the envs they returned. Every call goes
through `venv.recv`, so every wait is bounded by the vector env's `worker_timeout`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pararl.errors import UsageError
from pararl.samplers.recv_types import ForwardCost, RecvPolicy, RecvResult
from pararl.vector.core import BatchVectorEnv

__all__ = ["ForwardCost", "MinEnvs", "RecvPolicy", "RecvResult", "Timeout", "WaitAll", "parse_recv"]


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


def parse_recv(spec: str | RecvPolicy) -> RecvPolicy:
    """A policy from text: 'all', 'auto', 'timeout=T' (seconds) or 'min_envs=K'
    (an env count, or a fraction of all envs when < 1)."""
    if not isinstance(spec, str):
        return spec
    text = spec.strip().lower()
    if text in ("all", "wait_all", "none"):
        return WaitAll()
    if text == "auto":
        from pararl.samplers.auto import Auto

        return Auto()
    key, _, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = None
    if key == "timeout" and number is not None:
        return Timeout(number)
    if key == "min_envs" and number is not None:
        return MinEnvs(number)
    raise UsageError(
        f"unknown recv policy {spec!r}; use 'all', 'auto', 'timeout=SECONDS' or "
        "'min_envs=K' (K an env count, or a fraction of all envs when < 1)"
    )
