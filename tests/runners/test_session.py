"""The session's metrics rows: one per step count, through evaluations and resumes."""

from __future__ import annotations

import csv
import functools
from pathlib import Path

from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.evaluation.episodes import Evaluator
from pararl.models import QNetwork
from pararl.rundir import RunDir
from pararl.runners.session import TrainSession


def logged_steps(run: RunDir) -> list[int]:
    with run.metrics.open() as f:
        return [int(float(row["env_steps"])) for row in csv.DictReader(f)]


def test_no_step_count_is_logged_twice(tmp_path: Path) -> None:
    """An evaluation's row and a console line's on the same step are one row; so are
    the row an interrupted run ended with and its resumed run's first tick there."""
    cfg = DQNConfig(
        env="CartPole-v1", eval_every=100, eval_episodes=1, log_every_s=0.0, total_steps=400,
        checkpoint_every=1000, progress="none", tensorboard=False,
    )  # fmt: skip
    model = functools.partial(QNetwork, 4, 2, (8,))()

    def state() -> dict[str, object]:
        return {"q": model.state_dict()}

    def session(run: RunDir, start: int) -> TrainSession:
        evaluator = Evaluator(env_factory(cfg.env), 1, 0, max_steps=20)
        return TrainSession(cfg, run, evaluator, None, start_steps=start, start_wall=1.0)

    run = RunDir.new(tmp_path / "run", "dqn", cfg.env)
    first = session(run, 0)
    for steps in (50, 100, 100, 150):  # at 100: the evaluation's row, then a console line's
        first.tick(steps, 0, model, state)
    first.finish(150, state, "interrupted")
    assert logged_steps(run) == [50, 100, 150]
    resumed = session(run, 150)
    for steps in (150, 200):  # its first tick at the checkpoint's own step
        resumed.tick(steps, 0, model, state)
    resumed.finish(200, state, "interrupted")
    assert logged_steps(run) == [50, 100, 150, 200]
