"""Checkpoints that make sense: the replay memory on disk once, never in `best`;
`latest` every few seconds, so that `kill -9` loses at most that; a resume that
says where it starts and what it dropped; a budget too small to learn in is said."""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pararl import checkpoint
from pararl.rundir import RunDir
from pararl.runners.resume import changed_envs, changed_mode, latest_checkpoint
from tests.procs import ctrl_c_while_saving

TINY = [
    "--total-steps", "1000", "--learning-starts", "100", "--eval-episodes", "2",
    "--eval-in", "inline", "--mode", "serial", "--progress", "plain", "--no-tensorboard",
    "--checkpoint-every", "400",
]  # fmt: skip


def holding_replay(run: Path) -> list[str]:
    """The files of `run/checkpoints` that hold a replay memory."""
    held = []
    for path in sorted((run / "checkpoints").glob("*.pt")):
        state = checkpoint.load(path)
        if state.get("replay") is not None:
            held.append(path.name)
    return held


def test_the_replay_memory_is_saved_once_and_never_in_best(tmp_path: Path, pararl: Any) -> None:
    run = tmp_path / "run"
    # no evaluation comes due: `best` is written at the end, from the final state;
    # and as with Atari's defaults for a short budget, nothing is learned: it says so
    result = pararl(
        "train", "dqn", *TINY, "--eval-every", "100000", "--learning-starts", "2000",
        "--run-dir", str(run),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "warning: --learning-starts 2,000 is not below --total-steps 1,000: this run "
        "collects transitions and never learns" in result.stderr
    )
    assert holding_replay(run) == ["replay.pt"]
    assert checkpoint.load(run / "checkpoints" / "replay.pt")["env_steps"] == 1000
    resumed = pararl("train", "--resume", str(run), "--total-steps", "1400")
    assert resumed.returncode == 0, resumed.stderr
    assert "replay memory restored (" in resumed.stderr
    assert holding_replay(run) == ["replay.pt"]  # replaced, not added to
    saved = checkpoint.load(run / "checkpoints" / "replay.pt")
    assert saved["env_steps"] == checkpoint.load(run / "checkpoints" / "final.pt")["env_steps"]


def test_resume_says_where_it_starts_and_what_it_dropped(tmp_path: Path, pararl: Any) -> None:
    run = tmp_path / "run"
    args = ("--eval-every", "500", "--log-every-s", "0", "--run-dir", str(run))
    assert pararl("train", "dqn", *TINY, *args).returncode == 0
    (run / "checkpoints" / "final.pt").unlink()  # as if killed after step_800
    path, state = latest_checkpoint(RunDir(run), "dqn")
    assert path.name == "step_800.pt"
    assert state["replay"] is None  # replay.pt is the final checkpoint's, at 1,000 steps
    resumed = pararl("train", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr
    line = next(x for x in resumed.stderr.splitlines() if "resuming from" in x)
    assert line.startswith("pararl: resuming from checkpoints/step_800.pt: 800 env steps, ")
    assert "metrics rows logged after it (up to 1,000 env steps) were dropped" in line
    assert "has no replay memory" in resumed.stderr
    assert "refills 100 transitions before it learns again" in resumed.stderr


def last_logged(run: Path) -> tuple[float, int]:
    """The wall seconds and env steps of the last complete metrics row."""
    with (run / "metrics.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r.get("wall_s")]
    return float(rows[-1]["wall_s"]), int(float(rows[-1]["env_steps"]))


def test_kill_9_loses_at_most_the_checkpoint_interval(tmp_path: Path, pararl: Any) -> None:
    """A long run killed outright (no handler runs) resumes from the `latest`
    checkpoint, written every `--checkpoint-every-s` seconds: what it loses is the
    time since then, at most that interval (plus one loop turn)."""
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "pararl.cli", "train", "dqn", "--env", "CartPole-v1",
            "--total-steps", "100000000", "--target-return", "1e9", "--eval-every", "100000000",
            "--checkpoint-every", "100000000", "--checkpoint-every-s", "1", "--log-every-s", "0.1",
            "--mode", "serial", "--eval-in", "inline", "--progress", "plain",
            "--no-tensorboard", "--run-dir", str(run),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # training is under way
            if "steps/s" in line:
                break
        time.sleep(2.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    path, state = latest_checkpoint(RunDir(run), "dqn")
    assert path.name == "latest.pt"
    saved = checkpoint.Header.of(state)
    logged_wall, logged_steps = last_logged(run)
    assert 0 < saved.env_steps <= logged_steps
    assert logged_wall - saved.wall_s <= 1.0 + 0.5, (logged_wall, saved.wall_s)

    resumed = pararl("train", "--resume", str(run), "--total-steps", str(saved.env_steps + 200))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from checkpoints/latest.pt: {saved.env_steps:,} env steps" in resumed.stderr


def test_a_resume_that_steps_other_envs_says_how_to_keep_them() -> None:
    # a DQN population saved async on 4 cores (3 actors' worth of envs, 2 each)
    async_run = {"mode": "async", "num_envs": 6, "workers": 1, "seeds": [0, 1]}
    assert changed_envs(async_run, {**async_run, "mode": "serial", "num_envs": 16}, 2) == (
        "pararl: this run stepped 6 envs each before and goes on with 16 (mode async, now "
        "serial): its envs follow its mode and workers; give --mode async --workers 3 "
        "to keep them"
    )
    one = {"mode": "sync", "num_envs": 8, "workers": 4}
    said = changed_envs(one, {**one, "num_envs": 16, "workers": 8}, 2)
    assert said is not None
    assert "stepped 8 envs before and goes on with 16:" in said
    assert said.endswith("give --workers 4 to keep them")
    assert changed_envs(one, one, 2) is None
    assert changed_envs({}, one, 2) is None  # a run that saved no env count
    # MAML saves its envs but no mode: they follow the cores, nothing to give
    assert changed_envs({"num_envs": 8}, {"num_envs": 16}, None) is None


def test_a_resume_in_another_mode_says_how_to_keep_it() -> None:
    # a PPO batch saved sync, resumed where `--mode auto` chooses async
    saved = {"mode": "sync", "num_envs": 8, "workers": 2, "seeds": [0, 1]}
    assert changed_mode(saved, {**saved, "mode": "async", "workers": 1}) == (
        "pararl: this run trained in mode sync before and goes on in mode async; "
        "give --mode sync to keep it"
    )
    assert changed_mode(saved, saved) is None
    assert changed_mode({"num_envs": 8}, saved) is None  # a run that saved no mode


def test_ctrl_c_while_the_replay_memory_is_written_waits_for_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C during the interrupted run's save: replay.pt and the checkpoint
    of its steps are both written before the interrupt takes effect."""
    import numpy as np

    from pararl.runners import checkpoints

    run = RunDir.new(tmp_path / "run", "dqn", "CartPole-v1")
    # replay.pt's object: the memory and its steps, no header of a checkpoint's
    ctrl_c_while_saving(monkeypatch, lambda obj: "replay" in obj and "algo" not in obj)
    header = checkpoint.Header("dqn", 1, 5_000, 1.0).as_dict()
    state = {**header, "replay": {"obs": np.zeros((10, 4), np.float32)}, "status": "interrupted"}
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save(run, "interrupted", state)
    assert checkpoint.load(run.replay)["env_steps"] == 5_000
    assert checkpoint.load(run.checkpoint("interrupted"))["env_steps"] == 5_000


def test_the_first_command_again_with_resume_added_is_the_run_resumed(tmp_path: Path) -> None:
    """--run-dir naming the directory resumed, and a sweep's values written another
    way (3e-4 for 0.0003), are what the run has; another directory and other values
    are refused."""
    from pararl.config import PPOConfig
    from pararl.errors import UsageError
    from pararl.runners.resume import resumed_config

    run = tmp_path / "copy"
    saved = PPOConfig(run_dir=tmp_path / "original", seeds=2, sweep=("lr=0.0003,0.001",))
    same = PPOConfig(run_dir=run, resume=run, seeds=2, sweep=("lr=3e-4,1e-3",))
    resumed = resumed_config(saved, same, {"run_dir", "resume", "seeds", "sweep"})
    assert resumed.run_dir == run
    assert resumed.sweep == saved.sweep  # kept as the run wrote it
    elsewhere = PPOConfig(run_dir=tmp_path / "other", resume=run)
    with pytest.raises(UsageError, match="a resumed run goes on in its own directory"):
        resumed_config(saved, elsewhere, {"run_dir", "resume"})
    other = PPOConfig(resume=run, seeds=2, sweep=("lr=3e-4,2e-3",))
    with pytest.raises(UsageError, match="keeps the settings it learned with"):
        resumed_config(saved, other, {"resume", "sweep"})


def test_a_checkpoint_is_as_readable_as_the_runs_other_files(tmp_path: Path) -> None:
    """Its mode is the umask's, as config.json's; a save cut off by a kill leaves a
    partial file that the run's next start removes."""
    import os

    from pararl.runners.session import TrainSession
    from tests.runners.test_session import CONFIG, Busy

    old = os.umask(0o022)
    try:
        run = RunDir.new(tmp_path / "run", "dqn", "CartPole-v1")
        checkpoint.save(run.checkpoint("best"), {"weights": 1})
        assert run.checkpoint("best").stat().st_mode & 0o777 == 0o644
        left = run.checkpoints / f".final.pt.0123abcd{checkpoint.PARTIAL}"
        left.write_bytes(b"cut off")
        TrainSession(CONFIG, run, Busy(), None).close()  # type: ignore[arg-type]
        assert not left.exists()
        assert run.checkpoint("best").is_file()
        assert run.config.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)
