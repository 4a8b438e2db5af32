"""The run directory: where a run's config, metrics, checkpoints and plots live."""

from __future__ import annotations

import itertools
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pararl.errors import UsageError


def safe_name(text: str) -> str:
    """`text` as a file name on any file system: every run of characters other than
    letters, digits, `.`, `_` and `-` becomes one `_` (`myenv:Maze-v0` -> `myenv_Maze-v0`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def _missing_above(root: Path) -> tuple[Path, ...]:
    """The directories above `root` that do not exist yet, nearest first."""
    return tuple(p for p in root.parents if p != Path(".") and not p.exists())


@dataclass(frozen=True)
class RunDir:
    root: Path
    # the directories `new` made above the run's (a run refused at start removes them)
    made: tuple[Path, ...] = field(default=(), compare=False)

    @staticmethod
    def new(base: Path | None, algo: str, env_id: str) -> RunDir:
        """`base` (refused if a run is there already: its metrics and checkpoints
        would mix with the new run's), or `runs/<algo>-<env>-<time>` (a new one: `-2`,
        `-3`, ... when two runs start in the same second)."""
        if base is not None:
            held = [path.name for path in RunDir(base).files if path.exists()]
            if held:
                raise UsageError(
                    f"--run-dir {base} already holds a run ({', '.join(held)}): continue "
                    f"it with `pararl train --resume {base}`, or give a new --run-dir "
                    "(or remove that one)"
                )
            made = _missing_above(base)
            try:
                base.mkdir(parents=True, exist_ok=True)
            except (FileExistsError, NotADirectoryError):
                raise UsageError(
                    f"--run-dir {base}: a file is in the way of that directory; give a "
                    "directory's path"
                ) from None
            except PermissionError:
                raise UsageError(
                    f"--run-dir {base}: not allowed to create it here; give a path you can write to"
                ) from None
            except OSError as exc:
                raise UsageError(
                    f"--run-dir {base}: cannot create it ({exc.strerror or exc}); give a path "
                    "you can write to"
                ) from None
            return RunDir(base, made)
        name = f"{algo}-{safe_name(env_id)}-{time.strftime('%Y%m%d-%H%M%S')}"
        for n in itertools.count(1):
            root = Path("runs") / (name if n == 1 else f"{name}-{n}")
            made = _missing_above(root)
            try:
                root.mkdir(parents=True)
            except FileExistsError:
                continue
            except OSError as exc:
                raise UsageError(
                    f"cannot create {root} here ({exc.strerror or exc}); run pararl from a "
                    "directory you can write to, or give --run-dir"
                ) from None
            return RunDir(root, made)
        raise AssertionError("unreachable")

    def discard(self) -> None:
        """Remove what a new run wrote here (`files`: none of them was here before it,
        or `new` would have refused the directory), then the directory if nothing else
        is in it."""
        for path in self.files:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        self.remove_if_empty()

    @property
    def files(self) -> tuple[Path, ...]:
        """What a run writes here, which a new run in the same directory would mix
        with its own."""
        return (
            self.config,
            self.metrics,
            self.evaluations,
            self.checkpoints,
            self.tensorboard,
            self.curve,
        )

    def remove_if_empty(self) -> None:
        """Remove the directory if nothing was written into it (a start that failed),
        and the directories `new` made above it that are left empty."""
        for directory in (self.root, *self.made):
            try:
                directory.rmdir()
            except OSError:
                return

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
    def replay(self) -> Path:
        """The replay memory, saved once beside the checkpoints (`runners.saving`)."""
        return self.checkpoints / "replay.pt"

    @property
    def evaluations(self) -> Path:
        """One row per greedy evaluation (metrics.csv has the training rows)."""
        return self.root / "eval.csv"

    @property
    def tensorboard(self) -> Path:
        return self.root / "tb"

    @property
    def curve(self) -> Path:
        return self.root / "learning_curve.png"
