"""Checkpoints: written atomically (temp file + rename), read with a clear error."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from pararl.errors import UsageError


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
