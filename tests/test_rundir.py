"""Run directories: names any file system takes, never shared by two runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pararl.rundir import RunDir, safe_name


def test_names_are_filesystem_safe() -> None:
    assert safe_name("myenv:Maze-v0") == "myenv_Maze-v0"
    assert safe_name("ALE/Pong-v5") == "ALE_Pong-v5"
    assert safe_name('a b\\c*?"<>|d') == "a_b_c_d"


def test_two_runs_in_the_same_second_get_their_own_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = RunDir.new(None, "dqn", "pkg.mod:Env-v0")
    second = RunDir.new(None, "dqn", "pkg.mod:Env-v0")
    assert ":" not in first.root.name
    assert first.root.name.startswith("dqn-pkg.mod_Env-v0-")
    assert first.root != second.root
    assert second.root.name.startswith(first.root.name)
