"""A finished run's state as `--resume` reads it: its final checkpoint with the
replay memory saved beside it (`pararl.runners.checkpoints`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pararl import checkpoint
from pararl.rundir import RunDir
from pararl.runners.checkpoints import replay_for


def final_state(run_dir: Path, name: str = "final") -> dict[str, Any]:
    """Checkpoint `name` of a run (final or interrupted: those save the replay
    memory), with its replay memory read back under "replay"."""
    state = checkpoint.load(RunDir(run_dir).checkpoint(name))
    return {**state, "replay": replay_for(RunDir(run_dir), state)}
