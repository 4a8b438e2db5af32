"""Background evaluation: same returns as inline, failures reported, nothing left."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch

from pararl.config import DQNConfig
from pararl.envs.make import env_factory
from pararl.evaluation.background import BackgroundEvaluator
from pararl.evaluation.child import NICENESS, EvalChild
from pararl.evaluation.episodes import Evaluator
from pararl.models import ActorCritic, QNetwork
from pararl.rundir import RunDir
from pararl.runners.session import TrainSession
from pararl.vector import WorkerError
from tests.procs import alive_after

MODEL_FN = functools.partial(QNetwork, 4, 2, (16,))


def _faulty_env() -> gym.Env:
    import pararl.envs  # noqa: F401  (registers pararl/... in the spawned child)

    return gym.make("pararl/Faulty-v0", fail_on="reset", at=1)


def _model(seed: int) -> QNetwork:
    torch.manual_seed(seed)
    return MODEL_FN()


def _wait(evaluator: BackgroundEvaluator, seconds: float = 20.0) -> np.ndarray:
    """The returns of the evaluation in flight."""
    for _ in range(int(seconds / 0.1)):
        result = evaluator.poll(timeout=0.1)
        if result is not None:
            return result.returns
    raise AssertionError("no evaluation result in time")


def test_failure_is_reported_and_close_leaves_no_process() -> None:
    background = BackgroundEvaluator(_faulty_env, 1, 0, MODEL_FN)
    pids = list(background._group.pids)
    try:
        background.submit(_model(0))
        with pytest.raises(WorkerError, match="FaultyEnv failed on reset"):
            _wait(background)
    finally:
        background.close()
        background.close()  # idempotent
    assert not alive_after(pids, 0.0)


def test_session_records_and_keeps_the_evaluated_state(tmp_path: Path) -> None:
    cfg = DQNConfig(
        eval_every=10,
        tensorboard=False,
        progress="none",
        target_return=1e9,
        total_steps=10**6,
        checkpoint_every=25_000,
    )
    background = BackgroundEvaluator(env_factory("CartPole-v1"), 2, 0, MODEL_FN)
    session = TrainSession(cfg, RunDir.new(tmp_path, "dqn", "x"), background, 1e9)
    model = _model(1)
    evaluated = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        session.tick(10, 0, model, lambda: {"q": model.state_dict()})
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
        session.finish(10, lambda: {"q": model.state_dict()}, "step budget reached")
    finally:
        session.close()
    assert session.last_eval is not None  # the pending evaluation was waited for
    assert session.run.curve.is_file()  # drawn by the evaluation process
    best = torch.load(session.run.checkpoint("best"), weights_only=True)  # no header here
    for name, value in evaluated.items():
        torch.testing.assert_close(best["q"][name], value)


def test_env_registered_at_run_time_is_carried_to_the_child() -> None:
    from pararl.runners.setup import _spec_for_child

    gym.register("RunTimeRegistered-v0", entry_point="pararl.envs.fake:StepCostEnv")
    try:
        spec = _spec_for_child("RunTimeRegistered-v0")
        assert isinstance(spec, gym.envs.registration.EnvSpec)
        background = BackgroundEvaluator(
            env_factory("RunTimeRegistered-v0"),
            1,
            0,
            functools.partial(QNetwork, 8, 2, (8,)),
            spec=spec,
        )
        try:
            background.submit(QNetwork(8, 2, (8,)))
            assert _wait(background).shape == (1,)
        finally:
            background.close()
        gym.register("InMain-v0", entry_point="__main__:SomeEnv")
        assert _spec_for_child("InMain-v0") is False  # such an env is evaluated in process
    finally:
        for env_id in ("RunTimeRegistered-v0", "InMain-v0"):
            gym.registry.pop(env_id, None)


def test_dead_evaluator_at_the_end_loses_no_checkpoint(tmp_path: Path) -> None:
    cfg = DQNConfig(
        eval_every=10,
        tensorboard=False,
        progress="none",
        target_return=1e9,
        total_steps=10**6,
        checkpoint_every=25_000,
    )
    background = BackgroundEvaluator(env_factory("CartPole-v1"), 2, 0, MODEL_FN)
    session = TrainSession(cfg, RunDir.new(tmp_path, "dqn", "x"), background, 1e9)
    model = _model(2)
    session.tick(10, 0, model, lambda: {"q": model.state_dict()})
    for pid in background._group.pids:
        psutil.Process(pid).kill()
    session.finish(30, lambda: {"q": model.state_dict()}, "step budget reached")
    assert session.run.checkpoint("final").is_file()
    assert session.run.checkpoint("best").is_file()
    assert not alive_after(background._group.pids, 0.0)


def test_an_adopted_child_returns_what_inline_does_for_the_submitted_weights() -> None:
    """A child started ahead (as `pararl train` starts it) is taken over by the
    evaluator and evaluates at a lower priority than training; its returns are those
    of the same evaluation inline, of the weights as they were at submit."""
    child = EvalChild()
    pids = list(child.group.pids)
    inline = Evaluator(env_factory("CartPole-v1"), 3, seed=5)
    background = BackgroundEvaluator(env_factory("CartPole-v1"), 3, 5, MODEL_FN, child=child)
    try:
        assert background._group is child.group
        model = _model(0)
        expected = inline.run(model).returns
        background.submit(model)
        assert background.busy
        with torch.no_grad():  # changing the weights now must not change the result
            for p in model.parameters():
                p.add_(1.0)
        np.testing.assert_array_equal(_wait(background), expected)
        assert not background.busy
        assert background.poll() is None  # taken once
        # it evaluates at a lower priority than training (`evaluation.child`)
        assert psutil.Process(pids[0]).nice() == min(os.nice(0) + NICENESS, 19)
    finally:
        inline.close()
        background.close()
        background.close()  # idempotent
    assert not alive_after(pids, 0.0)


def test_child_not_taken_is_closed_and_a_dead_one_replaced() -> None:
    child = EvalChild()
    pids = list(child.group.pids)
    child.close(grace=0.0)
    child.close()  # idempotent
    assert not alive_after(pids, 0.0)

    dead = EvalChild()
    psutil.Process(dead.group.pids[0]).kill()
    dead.group.processes[0].join(5.0)
    background = BackgroundEvaluator(env_factory("CartPole-v1"), 1, 0, MODEL_FN, child=dead)
    try:
        assert background._group is not dead.group
        assert all(p.is_alive() for p in background._group.processes)
    finally:
        background.close()
    assert not alive_after(dead.group.pids + background._group.pids, 0.0)


def test_cli_prestarts_the_child_and_bad_input_leaves_none(tmp_path: Path) -> None:
    """`pararl train` spawns the evaluation child before importing torch; a run that
    then fails on bad input exits 2 with one line and takes the child down."""
    proc = psutil.Popen(
        [sys.executable, "-m", "pararl.cli", "train", "ppo", "--env", "NoSuchEnv-v0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    seen: set[int] = set()
    while proc.poll() is None:
        with contextlib.suppress(psutil.NoSuchProcess):
            seen.update(c.pid for c in proc.children(recursive=True))
        time.sleep(0.01)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert seen, "no evaluation child was started"
    assert not alive_after(sorted(seen))


def test_every_evaluation_adds_a_training_row_with_rates(tmp_path: Path) -> None:
    """A run shorter than the console's log interval still gets a training curve."""
    import csv

    cfg = DQNConfig(
        eval_every=10,
        tensorboard=False,
        progress="none",
        target_return=1e9,
        log_every_s=1e9,
        total_steps=10**6,
        checkpoint_every=25_000,
    )
    evaluator = Evaluator(env_factory("CartPole-v1"), 2, seed=0)
    session = TrainSession(cfg, RunDir.new(tmp_path, "dqn", "x"), evaluator, 1e9)
    model = _model(4)
    episode = {"episode": {"r": np.array([7.0])}, "_episode": np.array([True])}
    try:
        for step in range(5, 35, 5):
            time.sleep(0.01)
            session.record_episodes(episode)
            session.tick(step, step // 5, model, lambda: {"q": model.state_dict()})
    finally:
        session.close()
    with session.run.metrics.open() as f:
        rows = list(csv.DictReader(f))
    training = [r for r in rows if r.get("episode_return")]
    assert [int(r["env_steps"]) for r in training] == [10, 20, 30]
    assert all(float(r["steps_per_s"]) > 0 for r in training)  # counted from the first tick
    with session.run.evaluations.open() as f:
        evaluations = list(csv.DictReader(f))
    assert [int(r["env_steps"]) for r in evaluations] == [10, 20, 30]


AC_FN = functools.partial(ActorCritic, 4, 2, True, (16,))


def test_sampled_evaluations_draw_their_own_stream_alike_in_process_and_in_the_child() -> None:
    """`--eval-actions sampled`: the actions come from the evaluations' own seeded
    stream (the same returns inline and in the child, evaluation after evaluation),
    not the greedy ones."""
    torch.manual_seed(0)
    model = AC_FN()  # near-uniform: the actor's head initialised at 0.01
    envs = env_factory("CartPole-v1")
    greedy = Evaluator(envs, 8, seed=5, stream=(3,))
    inline = Evaluator(envs, 8, seed=5, stream=(3,), actions="sampled")
    background = BackgroundEvaluator(envs, 8, 5, AC_FN, stream=(3,), actions="sampled")
    try:
        first = inline.run(model)
        second = inline.run(model)
        for expected in (first.returns, second.returns):
            background.submit(model)
            np.testing.assert_array_equal(_wait(background), expected)
        # not the greedy actions (this random network balances the pole greedily)
        assert greedy.run(model).lengths.mean() > 2 * first.lengths.mean()
        torch.manual_seed(1)
        again = Evaluator(envs, 8, seed=5, stream=(3,), actions="sampled")
        try:  # the global torch stream plays no part
            np.testing.assert_array_equal(again.run(model).returns, first.returns)
        finally:
            again.close()
    finally:
        greedy.close()
        inline.close()
        background.close()


def test_dqn_refuses_sampled_evaluations() -> None:
    from pararl.errors import UsageError

    with pytest.raises(UsageError, match="--eval-actions sampled"):
        DQNConfig(eval_actions="sampled").validate()


def test_a_run_that_never_gave_its_child_work_evaluates_its_final_weights_here(
    tmp_path: Path,
) -> None:
    """With `--eval-in auto`, a run that ends before any evaluation fell due (a budget
    under `eval_every`) evaluates its final weights in this process rather than wait
    for a child that may still be importing torch; the episodes are the ones the child
    plays for `--eval-in process`, so the return is the same."""
    import csv

    from pararl import PPOConfig, train

    def run(eval_in: str) -> tuple[object, list[dict[str, str]]]:
        cfg = PPOConfig(
            env="CartPole-v1", total_steps=512, eval_every=10**6, mode="serial", seed=3,
            eval_episodes=3, eval_in=eval_in, run_dir=tmp_path / eval_in, progress="none",
            tensorboard=False,
        )  # fmt: skip
        session = train(cfg)
        with (tmp_path / eval_in / "eval.csv").open() as f:
            return session.evaluator, list(csv.DictReader(f))

    here, rows = run("auto")
    child, child_rows = run("process")
    assert isinstance(here, Evaluator)
    assert isinstance(child, BackgroundEvaluator)
    assert [r["env_steps"] for r in rows] == [r["env_steps"] for r in child_rows] == ["512"]
    assert float(rows[0]["eval_return"]) == float(child_rows[0]["eval_return"])
