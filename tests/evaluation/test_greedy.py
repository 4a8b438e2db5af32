"""Every evaluation ends: an episode that never ends is cut at the cap and reported
as truncated, in bounded time, in this process, in the evaluation process and
through `pararl train` and `pararl evaluate`; a long evaluation says how far it is."""

from __future__ import annotations

import csv
import functools
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import pararl.envs  # noqa: F401 - registers pararl/NeverEnds-v0
from pararl.envs.make import env_factory
from pararl.evaluation import greedy
from pararl.evaluation.background import BackgroundEvaluator
from pararl.evaluation.greedy import DEFAULT_EPISODE_CAP, Evaluator, Progress, episode_cap
from pararl.models import QNetwork

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
        episodes = evaluator.run(lambda obs: np.zeros(len(obs), np.int64))
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
        episodes = evaluator.run(lambda obs: np.zeros(len(obs), np.int64))
    finally:
        evaluator.close()
    assert episodes.truncated.all() or (episodes.lengths < 5).any()
    assert not episodes.capped.any()
    assert episodes.cap_note() == ""


def test_a_long_evaluation_reports_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(greedy, "PROGRESS_EVERY_S", 0.0)
    seen: list[Progress] = []
    evaluator = Evaluator(env_factory(NEVER_ENDS), 2, seed=0, max_steps=20)
    try:
        evaluator.run(lambda obs: np.zeros(len(obs), np.int64), seen.append)
    finally:
        evaluator.close()
    assert [p.steps for p in seen] == list(range(1, 21))
    assert seen[-1].text() == "0/2 episodes ended, 20 steps (at most 20)"


def test_the_evaluation_process_caps_and_reports_progress_too() -> None:
    """Steps of 1 ms: 3,000 of them take ~3 s, long enough for a progress report."""
    env_fn = functools.partial(gym.make, NEVER_ENDS, cost_us=1000.0)
    background = BackgroundEvaluator(
        env_fn, 1, 0, functools.partial(QNetwork, 8, 2, (8,)), max_steps=3_000
    )
    try:
        background.submit(QNetwork(8, 2, (8,)))
        progress: list[Progress] = []
        deadline = time.monotonic() + 60
        while (episodes := background.poll(timeout=0.2)) is None:
            assert time.monotonic() < deadline, "no answer from the evaluation process"
            if background.progress is not None and background.progress not in progress:
                progress.append(background.progress)
    finally:
        background.close()
    assert episodes.capped.all()
    assert episodes.lengths.tolist() == [3_000]
    assert progress, "no progress report arrived"
    assert 0 < progress[-1].steps < 3_000


TINY = [
    "--env", NEVER_ENDS, "--total-steps", "600", "--learning-starts", "100",
    "--eval-every", "300", "--eval-episodes", "2", "--eval-max-steps", "50",
    "--eval-in", "inline", "--mode", "serial", "--progress", "plain", "--no-tensorboard",
]  # fmt: skip


def test_training_and_evaluate_report_capped_episodes(
    tmp_path: Path, pararl: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(greedy, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(greedy, "NOTE_EVERY_S", 0.0)
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
