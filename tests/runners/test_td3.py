"""TD3 end to end, from its spec alone: `pararl train td3` on the command line
(defaults printed and saved; metrics.csv with its columns; TensorBoard files),
serial and sync on the same data give the same parameters bit for bit, async actors
keep the update-to-data ratio, checkpoints resume without refilling the replay,
`pararl evaluate` and `--video` play its actor, `pararl.load(run).act()` acts within
the bounds, and it learns at all."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers import FilterObservation, FlattenObservation, TimeLimit

import pararl
from pararl import train
from pararl.config.td3 import TD3Config
from pararl.envs.fake import CueEnv
from tests.runners.saved import final_state
from tests.runners.test_multi_input import READ, SMALL_IMAGE

SMALL: dict[str, Any] = dict(
    env="Pendulum-v1",
    total_steps=400,
    learning_starts=200,
    batch_size=32,
    buffer_size=10_000,
    hidden=(16,),
    workers=1,
    envs_per_worker=2,
    eval_every=10**9,
    eval_in="inline",
    checkpoint_every=10**9,
    tensorboard=False,
    progress="none",
    seed=4,
)


def test_the_command_line_trains_it_and_saves_what_it_said(tmp_path: Path, pararl: Any) -> None:
    run = tmp_path / "run"
    done = pararl(
        "train", "td3", "--env", "Pendulum-v1", "--mode", "serial", "--total-steps", "400",
        "--learning-starts", "200", "--hidden", "16", "--eval-every", "400",
        "--eval-episodes", "1", "--eval-in", "inline", "--progress", "plain",
        "--run-dir", str(run),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "defaults for continuous" in x)
    for shown in ("lr 0.001", "batch_size 256", "tau 0.005", "exploration_noise 0.1"):
        assert shown in line
    saved = json.loads((run / "config.json").read_text())
    assert (saved["algo"], saved["lr"], saved["exploration_noise"], saved["policy_delay"]) == (
        "TD3Config",
        1e-3,
        0.1,
        2,
    )
    header = (run / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {"critic_loss", "actor_loss", "q_mean", "policy_lag"} <= set(header)
    assert len((run / "eval.csv").read_text().splitlines()) == 2  # header, one evaluation
    assert list((run / "tb").glob("events.out.tfevents.*"))
    refused = pararl("train", "td3", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "x"))
    assert refused.returncode == 2
    assert refused.stderr.startswith("pararl: error: TD3 needs a continuous (Box)")


@pytest.fixture(scope="module")
def serial_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A serial run of SMALL, trained once for the module (tests that change it copy it)."""
    run = tmp_path_factory.mktemp("td3") / "serial"
    train(TD3Config(mode="serial", run_dir=run, **SMALL))  # type: ignore[arg-type]
    return run


def test_serial_and_sync_give_the_same_parameters(serial_run: Path, tmp_path: Path) -> None:
    train(TD3Config(mode="sync", run_dir=tmp_path / "sync", **SMALL))  # type: ignore[arg-type]
    serial, sync = final_state(serial_run), final_state(tmp_path / "sync")
    assert serial["learner"]["updates"] == sync["learner"]["updates"] == 400 - 200 - 2
    np.testing.assert_array_equal(serial["replay"]["action"], sync["replay"]["action"])
    for net in ("actor", "critic", "actor_target", "critic_target"):
        a, b = serial["learner"][net], sync["learner"][net]
        assert all(torch.equal(a[k], b[k]) for k in a), net


def test_async_learns_from_actor_processes_within_the_ratio(tmp_path: Path) -> None:
    train(TD3Config(mode="async", run_dir=tmp_path, **{**SMALL, "total_steps": 700}))  # type: ignore[arg-type]
    state = final_state(tmp_path)
    assert state["env_steps"] >= 700
    # one update per env step after the first 200, behind by at most one chunk (64)
    assert 700 - 200 - 64 - 8 <= state["learner"]["updates"] <= state["env_steps"] - 200
    actions = state["replay"]["action"]
    assert (actions >= -2).all()
    assert (actions <= 2).all()


def test_resume_evaluate_video_and_load(serial_run: Path, tmp_path: Path, pararl: Any) -> None:
    run = tmp_path / "run"
    shutil.copytree(serial_run, run)  # the module's run stays as it finished
    first = final_state(run)
    session = train(TD3Config(resume=run, total_steps=700))
    second = final_state(run)
    assert session is not None
    assert (first["env_steps"], second["env_steps"]) == (400, 700)
    assert second["learner"]["updates"] == first["learner"]["updates"] + 300  # no refill
    kept = len(first["replay"]["obs"])
    np.testing.assert_array_equal(second["replay"]["obs"][:kept], first["replay"]["obs"])
    done = pararl("evaluate", str(run), "--episodes", "2", "--checkpoint", "final")
    assert done.returncode == 0, done.stderr
    assert "Pendulum-v1: mean return" in done.stdout
    video = tmp_path / "pendulum.gif"
    done = pararl(
        "evaluate", str(run), "--episodes", "1", "--max-steps", "20", "--video", str(video)
    )
    assert done.returncode == 0, done.stderr
    assert video.read_bytes().startswith(b"GIF8")
    agent = pararl_load(run)
    obs = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    greedy = agent.act(obs)
    assert greedy.shape == (64, 1)
    np.testing.assert_array_equal(greedy, agent.act(obs))  # deterministic
    explored = agent.act(obs, deterministic=False)
    assert not np.array_equal(explored, greedy)
    assert (np.abs(explored) <= 2).all()


def pararl_load(run: Path) -> Any:
    return pararl.load(run, "final")


def vector_cue() -> gym.Env[Any, Any]:
    """`pararl/DictCue-v0`'s vector leaf alone, flat (TD3 takes Box observations): its
    first entry says which sign of the action earns 1."""
    env = CueEnv(cue_in="vector", continuous=True, **SMALL_IMAGE)
    return TimeLimit(FlattenObservation(FilterObservation(env, ["vector"])), 16)


def test_it_learns_at_all(tmp_path: Path) -> None:
    """The actor learns to answer the cue: 14 of an episode's 16 steps or more (seeds
    0-2: 15.5-16.0 after 384-512 steps) where its untrained self and random play get
    about half (7.0-8.25 over 1,024 steps of seed 0 without an update). How well TD3
    learns control is the td3 benchmark's (HalfCheetah against SB3)."""
    cfg = TD3Config(
        env=vector_cue, mode="serial", total_steps=1_500, learning_starts=256,
        buffer_size=5_000, batch_size=64, replay_ratio=0.5, gamma=0.5, hidden=(64, 64),
        eval_every=128, eval_episodes=4, target_return=READ, workers=1, envs_per_worker=2,
        eval_in="inline", checkpoint_every=10**9, tensorboard=False, progress="none",
        run_dir=tmp_path,
    )  # fmt: skip
    session = train(cfg)
    assert session.best_eval >= READ, f"best greedy return {session.best_eval}"
