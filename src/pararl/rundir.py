"""The run directory: where a run's config, metrics, checkpoints and plots live."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunDir:
    root: Path

    @staticmethod
    def new(base: Path | None, algo: str, env_id: str) -> RunDir:
        if base is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            base = Path("runs") / f"{algo}-{env_id.replace('/', '_')}-{stamp}"
        base.mkdir(parents=True, exist_ok=True)
        return RunDir(base)

    def remove_if_empty(self) -> None:
        """Remove the directory if nothing was written into it (a start that failed)."""
        with contextlib.suppress(OSError):
            self.root.rmdir()

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.csv"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    def checkpoint(self, name: str) -> Path:
        return self.checkpoints / f"{name}.pt"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tb"

    @property
    def curve(self) -> Path:
        return self.root / "learning_curve.png"
