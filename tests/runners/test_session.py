"""The session's metrics rows, through evaluations and resumes, and a run that ends
before its first iteration."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.evaluation.episodes import Evaluator
from pararl.models import QNetwork
from pararl.rundir import RunDir
from pararl.runners.session import TrainSession

CONFIG = DQNConfig(
    env="CartPole-v1", eval_every=100, eval_episodes=1, log_every_s=0.0, total_steps=400,
    checkpoint_every=1000, progress="none", tensorboard=False,
)  # fmt: skip
MODEL = QNetwork(4, 2, (8,))


def state() -> dict[str, object]:
    return {"q": MODEL.state_dict()}


def session(run: RunDir, start: int, resumed: bool = False) -> TrainSession:
    evaluator = Evaluator(env_factory(CONFIG.env), 1, 0, max_steps=20)
    return TrainSession(
        CONFIG, run, evaluator, None, start_steps=start, start_wall=1.0, resumed=resumed
    )


def logged(run: RunDir) -> list[tuple[int, int]]:
    """(env steps, updates) of each metrics row."""
    with run.metrics.open() as f:
        return [(int(float(r["env_steps"])), int(float(r["updates"]))) for r in csv.DictReader(f)]


def test_a_row_only_when_something_moved_on(tmp_path: Path) -> None:
    """A tick with nothing new since the last row (an evaluation's row, then a console
    line's) adds none, nor does a resumed run's first tick where its checkpoint's run
    ended; a learning-only tick (more updates, the same env steps) does."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    first = session(run, 0)
    for steps, updates in ((50, 1), (100, 2), (100, 2), (100, 7), (150, 9)):
        first.tick(steps, updates, MODEL, state)
    first.finish(150, state, "interrupted")
    assert logged(run) == [(50, 1), (100, 2), (100, 7), (150, 9)]
    resumed = session(run, 150)
    for steps, updates in ((150, 9), (200, 12)):
        resumed.tick(steps, updates, MODEL, state)
    resumed.finish(200, state, "interrupted")
    assert logged(run) == [(50, 1), (100, 2), (100, 7), (150, 9), (200, 12)]


def test_a_new_run_that_ends_before_its_first_iteration_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C at start, or an env that fails at once: nothing trained, nothing to
    resume, so nothing stays, and the same command can run again there; a user's own
    file in the directory stays."""
    run = RunDir.new(tmp_path / "run", "dqn", CONFIG.env)
    (run.root / "notes.txt").write_text("mine")
    session(run, 0).finish(0, state, "interrupted")
    assert sorted(p.name for p in run.root.iterdir()) == ["notes.txt"]
    assert "interrupted before its first iteration; nothing saved" in capsys.readouterr().err
    RunDir.new(run.root, "dqn", CONFIG.env)  # not refused
    (run.root / "notes.txt").unlink()
    session(run, 0).finish(0, state, "failed")
    assert not run.root.exists()
    # a resumed run is never discarded, even one resumed from a checkpoint at 0 steps
    run = RunDir.new(tmp_path / "zero", "dqn", CONFIG.env)
    first = session(run, 0)
    first.tick(0, 0, MODEL, state)
    first.finish(0, state, "interrupted")
    session(run, 0, resumed=True).finish(0, state, "interrupted")
    assert (run.checkpoints / "interrupted.pt").is_file()
