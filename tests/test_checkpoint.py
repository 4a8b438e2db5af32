"""The one checkpoint header: written the same by every algorithm, read back with the
defaults an older checkpoint needs."""

from __future__ import annotations

from pathlib import Path

from pararl import checkpoint
from pararl.checkpoint import Header


def test_header_round_trips_through_a_file(tmp_path: Path) -> None:
    state = {**Header("ppo", 2, 4096, 12.5).as_dict(), "learner": {"updates": 3}}
    checkpoint.save(tmp_path / "c.pt", state)
    loaded = checkpoint.load(tmp_path / "c.pt")
    assert Header.of(loaded) == Header("ppo", 2, 4096, 12.5)
    assert loaded["learner"] == {"updates": 3}


def test_an_older_checkpoint_without_wall_time_or_format_reads() -> None:
    assert Header.of({"algo": "dqn", "env_steps": 100}) == Header("dqn", 1, 100, 0.0)
