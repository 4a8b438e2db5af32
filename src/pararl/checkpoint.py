"""Checkpoints: one header for every algorithm's, written atomically (temp file +
rename), read with a clear error."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pararl.errors import UsageError


@dataclass(frozen=True)
class Header:
    """What every checkpoint begins with, whatever the algorithm: the version of the
    algorithm's own state's format, the algorithm, and how far the run had got (its
    env steps, the step budget's unit, and its wall seconds). `--resume` picks a
    checkpoint by it (`runners.resume`)."""

    algo: str
    format: int
    env_steps: int
    wall_s: float

    def as_dict(self) -> dict[str, Any]:
        """The header's entries of a checkpoint (the algorithm's state follows)."""
        return {
            "format": self.format,
            "algo": self.algo,
            "env_steps": self.env_steps,
            "wall_s": self.wall_s,
        }

    @classmethod
    def of(cls, state: dict[str, Any]) -> Header:
        """The header of a loaded checkpoint (one written before a run kept its wall
        time, or the first format version, has 0.0 and 1)."""
        return cls(
            str(state.get("algo", "")),
            int(state.get("format", 1)),
            int(state.get("env_steps", 0)),
            float(state.get("wall_s", 0.0)),
        )


def save(path: Path, state: dict[str, Any]) -> None:
    """Write `state` to `path` so that a crash mid-write never leaves a broken file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(
            f"no checkpoint at {path}; pass a run directory that holds "
            "checkpoints/ (from pararl train)"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise UsageError(
            f"checkpoint {path} is corrupt or unreadable ({type(exc).__name__}); "
            "use another checkpoint of the run (checkpoints/) or retrain"
        ) from exc
    if not isinstance(state, dict) or "format" not in state:
        raise UsageError(
            f"{path} is not a pararl checkpoint; use a file from a run's checkpoints/ directory"
        )
    return state
