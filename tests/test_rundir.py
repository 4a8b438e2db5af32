"""Run directories: names any file system takes, never shared by two runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pararl.errors import UsageError
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


def test_a_new_run_into_a_run_directory_is_refused_and_the_run_there_kept(
    tmp_path: Path, pararl: Any
) -> None:
    """`--run-dir` naming a run's directory: one line, exit 2, and the run there as it
    was (its metrics and checkpoints would have mixed with the new run's)."""
    run = tmp_path / "run"
    args = ("train", "dqn", "--env", "CartPole-v1", "--total-steps", "600",
            "--learning-starts", "100", "--mode", "serial", "--eval-every", "1000000",
            "--progress", "none", "--no-tensorboard", "--run-dir", str(run))  # fmt: skip
    assert pararl(*args).returncode == 0
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    again = pararl(*args)
    assert again.returncode == 2
    assert again.stderr.strip().count("\n") == 0, again.stderr
    assert "--resume" in again.stderr
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    # an empty directory, or one with the user's own files, takes a new run; one with
    # what a run writes (TensorBoard's events, say) does not
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    assert RunDir.new(tmp_path / "mine", "dqn", "CartPole-v1").root == tmp_path / "mine"
    (tmp_path / "events" / "tb").mkdir(parents=True)
    for held in (run, tmp_path / "events"):
        with pytest.raises(UsageError):
            RunDir.new(held, "dqn", "CartPole-v1")


def test_a_file_in_the_way_of_the_run_dir_is_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("mine")
    for base in (afile, afile / "sub"):
        with pytest.raises(UsageError, match=r"^--run-dir .*: a file is in the way"):
            RunDir.new(base, "ppo", "CartPole-v1")
    assert afile.read_text() == "mine"


def test_a_run_dir_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--run-dir /proc/no-such-process/run: cannot create"):
        RunDir.new(Path("/proc/no-such-process/run"), "dqn", "CartPole-v1")


def test_a_refused_start_removes_the_directories_it_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pararl: Any
) -> None:
    """A start refused after its run directory was made leaves nothing: neither the
    run's directory nor those made above it (kept: those that were there)."""
    (tmp_path / "kept").mkdir()
    run = RunDir.new(tmp_path / "kept" / "a" / "b" / "run", "dqn", "CartPole-v1")
    run.remove_if_empty()
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
    assert not any((tmp_path / "kept").iterdir())
    monkeypatch.chdir(tmp_path / "kept")
    refused = pararl("train", "dqn", "--env", "CartPole-v1", "--buffer-size", "100000000000")
    assert refused.returncode == 2, refused.stderr
    assert not any((tmp_path / "kept").iterdir())  # no runs/ left behind
