"""Every evaluation ends: an episode that never ends is cut at the cap and reported
as truncated, in bounded time, in this process, in the evaluation process and
through `pararl train` and `pararl evaluate`; a long evaluation says how far it is."""

from __future__ import annotations

import csv
import functools
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pararl.envs  # noqa: F401 - registers pararl/NeverEnds-v0
from pararl.config import DQNConfig
from pararl.envs.fake import NeverEndsEnv
from pararl.envs.make import env_factory
from pararl.evaluation import episodes
from pararl.evaluation.background import BackgroundEvaluator
from pararl.evaluation.episodes import DEFAULT_EPISODE_CAP, Evaluator, Progress, episode_cap
from pararl.models import QNetwork
from pararl.models.acting import Stateless
from pararl.rundir import RunDir
from pararl.runners.session import TrainSession

NEVER_ENDS = "pararl/NeverEnds-v0"


def test_the_cap_is_the_given_one_else_the_envs_own_else_the_default() -> None:
    assert episode_cap("CartPole-v1", {}, None) == 500  # its own time limit
    assert episode_cap("CartPole-v1", {"max_episode_steps": 50}, None) == 50
    assert episode_cap(NEVER_ENDS, {}, None) == DEFAULT_EPISODE_CAP == 27_000  # Atari's
    assert episode_cap(NEVER_ENDS, {}, 123) == 123
    assert episode_cap("module:Unregistered-v0", {}, None) == DEFAULT_EPISODE_CAP


def test_an_episode_that_never_ends_is_cut_and_reported_truncated() -> None:
    evaluator = Evaluator(env_factory(NEVER_ENDS), 3, seed=0, max_steps=200)
    try:
        start = time.monotonic()
        episodes = evaluator.run(Stateless(lambda obs: np.zeros(len(obs), np.int64)))
        assert time.monotonic() - start < 10
    finally:
        evaluator.close()
    np.testing.assert_array_equal(episodes.returns, [200.0] * 3)  # reward 1 per step
    np.testing.assert_array_equal(episodes.lengths, [200] * 3)
    assert episodes.truncated.all()
    assert episodes.capped.all()
    assert "3 of 3 episodes reached the evaluation cap of 200 steps" in episodes.cap_note()


def test_an_env_time_limit_is_truncation_but_not_the_cap() -> None:
    evaluator = Evaluator(
        env_factory("CartPole-v1", kwargs={"max_episode_steps": 5}), 2, seed=0, max_steps=500
    )
    try:
        episodes = evaluator.run(Stateless(lambda obs: np.zeros(len(obs), np.int64)))
    finally:
        evaluator.close()
    assert episodes.truncated.all() or (episodes.lengths < 5).any()
    assert not episodes.capped.any()
    assert episodes.cap_note() == ""


def test_a_long_evaluation_reports_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(episodes, "PROGRESS_EVERY_S", 0.0)
    seen: list[Progress] = []
    evaluator = Evaluator(env_factory(NEVER_ENDS), 2, seed=0, max_steps=20)
    try:
        evaluator.run(Stateless(lambda obs: np.zeros(len(obs), np.int64)), seen.append)
    finally:
        evaluator.close()
    assert [p.steps for p in seen] == list(range(1, 21))
    assert seen[-1].text() == "0/2 episodes ended, 20 steps (at most 20)"


class SlowNeverEnds(NeverEndsEnv):
    """`pararl/NeverEnds-v0` whose steps take 1 ms of wall time asleep: the evaluation
    process, which runs niced, takes as long with other processes busy on every core
    as on idle ones (steps that burn 1 ms of CPU there took ten times as long)."""

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        time.sleep(0.001)
        return super().step(action)


def test_a_run_waiting_for_the_evaluation_process_says_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's budget is spent while the evaluation process plays episodes that
    never end (steps of 1 ms: 2,500 take over 2.5 s, past the child's first progress
    report at 2 s): the run waits for them, saying how far they are, and records them
    as cut at the cap."""
    monkeypatch.setattr(episodes, "NOTE_EVERY_S", 0.0)  # every report the child sends
    cfg = DQNConfig(
        env=NEVER_ENDS, eval_every=10, eval_max_steps=2_500,
        total_steps=10, checkpoint_every=10, progress="plain", tensorboard=False,
    )  # fmt: skip
    model_fn = functools.partial(QNetwork, 8, 2, (8,))
    evaluator = BackgroundEvaluator(SlowNeverEnds, 1, 0, model_fn, max_steps=2_500)
    session = TrainSession(cfg, RunDir.new(tmp_path, "dqn", "x"), evaluator, None)
    model = model_fn()
    session.tick(10, 0, model, lambda: {"q": model.state_dict()})
    assert evaluator.busy
    session.finish(10, lambda: {"q": model.state_dict()}, "step budget reached")
    err = capsys.readouterr().err
    assert "pararl: evaluating the weights at 10 env steps: 0/1 episodes ended" in err
    assert "1 of 1 episodes reached the evaluation cap of 2,500 steps" in err
    with session.run.evaluations.open() as f:
        [row] = list(csv.DictReader(f))
    assert (row["eval_truncated"], row["eval_length"]) == ("1", "2500.0")


TINY = [
    "--env", NEVER_ENDS, "--total-steps", "600", "--learning-starts", "100",
    "--eval-every", "300", "--eval-episodes", "2", "--eval-max-steps", "50",
    "--eval-in", "inline", "--mode", "serial", "--progress", "plain", "--no-tensorboard",
]  # fmt: skip


def test_training_and_evaluate_report_capped_episodes(
    tmp_path: Path, pararl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(episodes, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(episodes, "NOTE_EVERY_S", 0.0)
    run = tmp_path / "run"
    trained = pararl("train", "dqn", *TINY, "--run-dir", str(run))
    assert trained.returncode == 0, trained.stderr
    assert "2 of 2 episodes reached the evaluation cap of 50 steps" in trained.stderr
    # an evaluation that runs long (here: any) says how far it is
    assert "evaluating the weights at 600 env steps: 0/2 episodes ended" in trained.stderr
    with (run / "eval.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) >= 2
    assert all(r["eval_truncated"] == "2" and float(r["eval_length"]) == 50 for r in rows)

    evaluated = pararl("evaluate", str(run), "--episodes", "3", "--max-steps", "20")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "mean return 20.0 ± 0.0 over 3 episodes" in evaluated.stdout
    assert "; 3 truncated" in evaluated.stdout
    assert "3 of 3 episodes reached the evaluation cap of 20 steps" in evaluated.stderr
    assert "--max-steps sets the cap" in evaluated.stderr
    assert "pararl: evaluating 3 episodes of pararl/NeverEnds-v0: 0/3 episodes ended" in (
        evaluated.stderr
    )
    default = pararl("evaluate", str(run), "--episodes", "1")  # the run's own cap, 50
    assert "mean return 50.0" in default.stdout
