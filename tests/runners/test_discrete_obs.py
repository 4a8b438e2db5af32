"""Bare Discrete and MultiDiscrete observations (FrozenLake's state index, as Gymnasium
gives it): PPO and DQN learn FrozenLake in this process and with worker or actor
processes, SAC takes them with Box actions; they travel and are stored as the int64
array the env gives (rollouts, n-step records, actors' outboxes, replay.pt) and the
multi-input encoder reads them one-hot; a run loads and acts on the env's ints (one,
or a batch), evaluates in the evaluation child and from the command line, and says
at start what reads them; the algorithms and models that cannot take them say which
can, in one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from pararl import DQNConfig, PPOConfig, SACConfig, checkpoint, load, train
from pararl.errors import UsageError

# FrozenLake 4x4 without slipping: reward 1 at the goal, which random play rarely
# reaches; a policy that reads the state index walks there in 6 steps. The untrained
# networks' greedy policies (seed 0) never get there; the runs stop at the first
# evaluation that does (PPO's after ~1,000 steps, DQN's after ~2,000)
FROZEN = {"is_slippery": False}
QUIET: dict[str, Any] = {
    "eval_episodes": 4,
    "target_return": 1.0,
    "tensorboard": False,
    "progress": "none",
    "eval_in": "inline",
}
PPO = PPOConfig(
    env="FrozenLake-v1",
    env_kwargs=FROZEN,
    total_steps=4_096,
    eval_every=256,
    workers=2,
    envs_per_worker=4,
    **QUIET,
)
DQN = DQNConfig(
    env="FrozenLake-v1",
    env_kwargs=FROZEN,
    total_steps=4_000,
    eval_every=250,
    learning_starts=500,
    buffer_size=5_000,
    workers=1,
    envs_per_worker=4,
    **QUIET,
)


@pytest.mark.parametrize("mode", ["serial", "sync"])
def test_ppo_learns_frozenlake_from_its_state_index(mode: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    session = train(dataclasses.replace(PPO, mode=mode, run_dir=run))
    assert session.last_eval == 1.0
    agent = load(run, "final")
    assert agent.obs_shape == ()
    assert agent.obs_dtype == np.int64
    obs, _ = agent.make_env().reset(seed=0)
    assert isinstance(obs, int)
    action = agent.act(obs)
    assert isinstance(action, int)
    assert agent.act([obs, obs]).tolist() == [action, action]
    assert agent.act(np.int64(obs), deterministic=False) in range(4)
    with pytest.raises(UsageError, match="this agent takes one observation 16 values"):
        agent.act({"state": obs})


# no sync case: its worker processes carry the index as PPO's sync run has them carry
# it, and its learner stores it as the serial run's does
@pytest.mark.parametrize("mode", ["serial", "async"])
def test_dqn_learns_frozenlake_and_stores_the_state_index_as_it_comes(
    mode: str, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    config = dataclasses.replace(DQN, mode=mode, run_dir=run)
    if mode == "async":  # its learner keeps the machine's pace, not the actors': a budget
        # to spare on a loaded machine (it stopped at 0.0 there)
        config = dataclasses.replace(config, total_steps=12_000)
    session = train(config)
    assert session.best_eval == 1.0
    replay = checkpoint.load(run / "checkpoints" / "replay.pt")["replay"]
    for name in ("obs", "next_obs"):  # one int64 per transition, not a one-hot row
        assert replay[name].dtype == np.int64
        assert replay[name].ndim == 1
        assert len(replay[name]) > 0
        assert replay[name].min() >= 0
        assert replay[name].max() < 16
    agent = load(run, "final")
    assert agent.act(0) in range(4)


def test_sac_takes_a_discrete_observation_with_box_actions_through_an_actor_process(
    tmp_path: Path,
) -> None:
    """The cue (0 or 1) is the observation itself; the sign of the action answers."""
    run = tmp_path / "run"
    config = SACConfig(
        env="pararl/DictCue-v0",
        env_kwargs={"cue_in": "count", "continuous": True, "bare": True},
        mode="async",
        total_steps=1_500,
        learning_starts=256,
        buffer_size=5_000,
        batch_size=64,
        replay_ratio=0.5,
        gamma=0.5,  # the cue of one step says nothing of the next
        lr=1e-3,
        hidden=(64, 64),
        eval_every=128,
        workers=1,
        envs_per_worker=2,
        run_dir=run,
        **{**QUIET, "target_return": 14.0},  # stops there (the untrained actor: 7-9)
    )
    session = train(config)
    assert session.last_eval is not None
    assert session.last_eval >= 14.0  # of 16 steps; random play earns about 8
    agent = load(run, "final")
    assert agent.act(1).shape == (1,)


def frozen_cells(**kwargs: Any) -> gym.Env:
    """FrozenLake whose observation is its cell's (row, column): MultiDiscrete([4, 4])."""
    env = gym.make("FrozenLake-v1", is_slippery=False, **kwargs)
    space = gym.spaces.MultiDiscrete([4, 4])
    return gym.wrappers.TransformObservation(env, lambda s: np.array(divmod(s, 4)), space)


def test_ppo_learns_from_a_multidiscrete_observation(tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = dataclasses.replace(PPO, env=frozen_cells, env_kwargs={}, mode="serial", run_dir=run)
    session = train(config)
    assert session.last_eval == 1.0
    agent = load(run, "final", env=frozen_cells)
    obs, _ = agent.make_env().reset(seed=0)
    assert obs.tolist() == [0, 0]
    assert agent.act(obs) in range(4)
    assert agent.act(np.stack([obs, obs])).shape == (2,)


def test_the_start_says_what_reads_it_and_it_evaluates_in_the_child_and_from_the_cli(
    tmp_path: Path, pararl: Any
) -> None:
    run = tmp_path / "run"
    done = pararl(
        "train", "ppo", "--env", "FrozenLake-v1", "--total-steps", "512", "--mode", "serial",
        "--progress", "plain", "--no-tensorboard", "--run-dir", str(run),
        "--eval-every", "256", "--eval-episodes", "2", "--eval-in", "process",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "multi-input encoder: observation 16 values -> one-hot (16): 16 features" in done.stderr
    assert "model multi-input" in done.stderr
    assert "eval @ 512 steps" in done.stderr  # from the evaluation child
    evaluated = pararl("evaluate", str(run), "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr
    assert "FrozenLake-v1: mean return" in evaluated.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["train", "td3", "--env", "pararl/DictCue-v0", "--env-kwargs", "cue_in=count",
             "continuous=true", "bare=true"],
            "gives Discrete observations, which SAC and PPO take",
        ),
        (["train", "maml", "--env", "FrozenLake-v1"], "PPO takes Discrete observations"),
        (["train", "maml", "--env", "CartPole-v1"], "DQN and PPO take Discrete actions"),
        (
            ["train", "maml", "--env", "pararl/MultiBinaryTarget-v0"],
            "PPO takes MultiBinary actions: pararl train ppo",
        ),
        (
            ["train", "ppo", "--env", "FrozenLake-v1", "--model", "mlp"],
            "use --model multi-input (or auto), which reads them one-hot",
        ),
        (
            ["train", "ppo", "--env", "CartPole-v1", "--model", "multi-input"],
            "reads Dict, Tuple, Discrete and MultiDiscrete observations",
        ),
    ],
)  # fmt: skip
def test_who_cannot_take_them_says_who_can_in_one_line(
    args: list[str], says: str, pararl: Any
) -> None:
    result = pararl(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert says in result.stderr
