"""DQN training runs end to end: reproducible, resumable, failures reported."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
import torch

from pararl import DQNConfig, checkpoint, train
from pararl.algos.dqn import DQNState
from pararl.envs.make import env_factory
from pararl.runners import offpolicy
from pararl.vector import SerialVectorEnv, WorkerError
from tests.procs import alive_after, interrupt_training, new_shm_entries, shm_entries
from tests.runners.saved import final_state

SMALL = dict(
    total_steps=1_200,
    learning_starts=200,
    eval_every=600,
    eval_episodes=2,
    checkpoint_every=600,
    tensorboard=False,
    progress="none",
    hidden=(32,),
    batch_size=32,
    envs_per_worker=2,
    workers=1,
    target_return=10_000.0,
    # evaluations in this process: an evaluation child is a process started and torch
    # imported, seconds of CPU a run; the tests that check processes ask for it
    eval_in="inline",
)


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    state = checkpoint.load(run_dir / "checkpoints" / "final.pt")
    return state["learner"]["q"]


@pytest.mark.learning_curve
def test_serial_is_bit_for_bit_reproducible_and_resumes(tmp_path: Path) -> None:
    for name in ("a", "b"):
        train(DQNConfig(mode="serial", seed=3, run_dir=tmp_path / name, **SMALL))
    a, b = final_weights(tmp_path / "a"), final_weights(tmp_path / "b")
    assert all(torch.equal(a[k], b[k]) for k in a)
    rows = (tmp_path / "a" / "metrics.csv").read_text().splitlines()
    assert len(rows) >= 2  # header, rows; the last where training stopped, whenever it logged
    assert rows[-1].split(",")[0] == str(SMALL["total_steps"])
    assert (tmp_path / "a" / "eval.csv").read_text().count("\n") >= 2
    assert (tmp_path / "a" / "learning_curve.png").is_file()

    run = tmp_path / "a"
    first = final_state(run)
    session = train(DQNConfig(resume=str(run), total_steps=2_400))  # a str, as from Python
    second = final_state(run)
    assert session.run.root == run
    assert first["env_steps"] == 1_200
    assert second["env_steps"] == 2_400
    assert second["learner"]["updates"] > first["learner"]["updates"]
    assert len(second["replay"]["action"]) > len(first["replay"]["action"])


def test_async_mode_trains_and_leaves_no_process(tmp_path: Path) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    # one update per env step, as MinAtar's DQN: chunks of 64 transitions, not 256
    config = {**SMALL, "eval_in": "process", "replay_ratio": 1.0}  # the evaluation child too
    session = train(DQNConfig(mode="async", run_dir=tmp_path / "run", **config))  # type: ignore[arg-type]
    assert session.run.checkpoint("final").is_file()
    with (tmp_path / "run" / "metrics.csv").open() as f:
        lags = [float(r["policy_lag"]) for r in csv.DictReader(f) if r["policy_lag"]]
    # the actor acts at most three chunks' updates behind the learner, plus the updates
    # between two weight refreshes (16 steps of its 2 envs)
    assert lags
    assert max(lags) <= 3 * offpolicy.CHUNK_UPDATES + 32
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["resolved"]["learner_threads"] == 1  # an MLP learner keeps one thread
    time.sleep(0.2)
    after = {
        p.pid
        for p in psutil.Process().children(recursive=True)
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    }
    assert after <= before | _helpers()


def _helpers() -> set[int]:
    """multiprocessing's own long-lived helpers (resource tracker, forkserver)."""
    return {
        p.pid
        for p in psutil.Process().children()
        if "resource_tracker" in " ".join(p.cmdline()) or "forkserver" in " ".join(p.cmdline())
    }


def test_an_actors_chunk_holds_the_same_updates_worth_whatever_the_replay_ratio() -> None:
    ratios = (0.25, 0.5, 1.0, 4.0)
    assert [offpolicy.chunk_for(r) for r in ratios] == [256, 128, 64, 16]
    assert offpolicy.chunk_for(0.0) == offpolicy.CHUNK_TRANSITIONS  # no ratio to hold


def faulty(**kw: object) -> dict[str, object]:
    """pararl/Faulty-v0 fails at each env's 300th step: an actor of 2 envs every 600."""
    return {**SMALL, "env": "pararl/Faulty-v0", "total_steps": 1_500, **kw}


def test_actor_that_raises_is_reported(tmp_path: Path) -> None:
    import pararl.envs  # noqa: F401 - registers pararl/Faulty-v0

    with pytest.raises(WorkerError, match="FaultyEnv failed") as info:
        train(DQNConfig(mode="async", run_dir=tmp_path / "run", **faulty()))
    assert info.value.worker == 0
    assert (tmp_path / "run" / "checkpoints" / "final.pt").exists() or (
        tmp_path / "run" / "checkpoints" / "interrupted.pt"
    ).exists()


def test_an_actors_failing_env_is_named_as_the_runs(tmp_path: Path) -> None:
    """Actor 1's first env (the run's env 2 of 4) fails: the error names actor 1 and
    env 2, not the actor's own env 0."""
    import pararl.envs  # noqa: F401 - registers pararl/Faulty-v0
    from pararl import seeding

    seeded = seeding.env_seeds(0, 2, "env", 1, 0, 0)[0]  # actor 1's streams: (1, 0, 0)
    # at its 50th step: well within the budget whichever actor runs ahead
    config = faulty(workers=2, env_kwargs={"seeded": seeded, "at": 50})
    with pytest.raises(WorkerError, match="FaultyEnv failed") as info:
        train(DQNConfig(mode="async", run_dir=tmp_path / "run", **config))  # type: ignore[arg-type]
    assert (info.value.worker, info.value.env_index) == (1, 2)


@pytest.mark.parametrize("workers", [1, 2])
def test_restart_actors_replaces_a_failed_actor(
    workers: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With one actor, and with two (the other goes on while the failed one restarts)."""
    import pararl.envs  # noqa: F401

    config = faulty(progress="plain", restart_actors=True, workers=workers)
    session = train(DQNConfig(mode="async", run_dir=tmp_path / "run", **config))  # type: ignore[arg-type]
    state = checkpoint.load(session.run.checkpoint("final"))
    assert state["env_steps"] >= 1_500  # the run went on past the two failures
    assert "restarting it, replay data kept" in capsys.readouterr().err


def test_sigterm_saves_checkpoint_and_leaves_nothing(tmp_path: Path) -> None:
    """SIGTERM (`kill`, a scheduler's pre-emption) takes Ctrl-C's path through the run
    (`errors.Terminated`), which the other runners' Ctrl-C tests check, and exits 143."""
    run = tmp_path / "run"
    shm_before = shm_entries()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pararl.cli",
            "train",
            "dqn",
            "--mode",
            "async",
            "--total-steps",
            "10000000",
            "--run-dir",
            str(run),
            "--progress",
            "plain",
            "--no-tensorboard",
            "--log-every-s",
            "0.2",
            "--workers",
            "1",
            "--eval-in",  # no evaluation child: test_ppo.py's Ctrl-C has one
            "inline",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    children, err = interrupt_training(proc, signal.SIGTERM)
    assert children
    assert proc.returncode == 143, err
    assert "terminated" in err
    assert (run / "checkpoints" / "interrupted.pt").is_file()
    assert str(run) in err or "run saved in" in err
    assert alive_after(children, 0.5) == []
    assert new_shm_entries(shm_before) == set()


def test_killed_actor_is_replaced_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL an actor mid-run: with --restart-actors the run goes on to its budget."""
    import threading

    me = psutil.Process()
    baseline = {p.pid for p in me.children(recursive=True)}
    killed: list[int] = []

    def kill_first_actor() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            fresh = [p for p in me.children() if p.pid not in baseline and "python" in p.name()]
            for p in fresh:
                if "resource_tracker" not in " ".join(p.cmdline()):
                    time.sleep(0.3)  # let it deliver some data first
                    os.kill(p.pid, signal.SIGKILL)
                    killed.append(p.pid)
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_first_actor, daemon=True)
    killer.start()
    config = {**SMALL, "total_steps": 6_000, "eval_every": 3_000, "progress": "plain"}
    config["eval_in"] = "inline"  # the first child started must be an actor
    session = train(
        DQNConfig(
            mode="async",
            run_dir=tmp_path / "run",
            restart_actors=True,
            **config,  # type: ignore[arg-type]
        )
    )
    killer.join(5)
    assert killed
    state = checkpoint.load(session.run.checkpoint("final"))
    assert state["env_steps"] >= 6_000
    assert "killed by signal SIGKILL" in capsys.readouterr().err


def test_a_resumed_serial_run_explores_with_the_epsilon_of_its_steps() -> None:
    """The in-process actor of a run resumed at step S acts with epsilon(S) from its
    first step on (here 0, greedy), not with the epsilon of step 0 (1, uniform)."""
    space, actions = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2)
    cfg = DQNConfig(env="CartPole-v1", n_step=1, eps_end=0.0, eps_decay_steps=100)
    state = DQNState(cfg.for_spaces(space, actions), space, actions, torch.device("cpu"))
    state.env_steps = 1_000
    envs = SerialVectorEnv([env_factory("CartPole-v1")] * 16)
    source = offpolicy.local_source(state, envs, (0, 0, state.env_steps))
    try:
        _, batch, _ = next(source.chunks(0.0))
        np.testing.assert_array_equal(batch.action, state.learner.q.greedy(batch.obs))
    finally:
        source.close()


def test_a_resume_without_its_memory_does_not_catch_up_on_the_refill(tmp_path: Path) -> None:
    """Resumed from `step_N` (no replay memory), the run refills `learning_starts`
    transitions, then learns at its replay ratio from there: the refill's steps are
    not counted (counted, they allowed ratio x learning_starts updates at once, on the
    small new memory), and a later resume keeps that offset."""
    run = tmp_path / "run"
    config = {**SMALL, "mode": "serial", "total_steps": 600, "checkpoint_every": 600}
    train(DQNConfig(run_dir=run, **config))  # type: ignore[arg-type]
    for name in ("final", "replay"):
        (run / "checkpoints" / f"{name}.pt").unlink()  # as if killed after step_600
    train(DQNConfig(resume=run, total_steps=1_200))
    state = checkpoint.load(run / "checkpoints" / "final.pt")
    ratio, starts, offset = 0.25, SMALL["learning_starts"], state["ratio_offset"]
    # the refill: `learning_starts` transitions, a few steps more (3-step returns
    # come out 2 steps late); the ratio counts the steps before it and after it
    assert starts <= offset <= starts + 32
    expected = ratio * (1_200 - starts - offset)  # (the last step's updates come next)
    assert expected - 1 <= state["learner"]["updates"] <= expected
