"""PPO takes MultiDiscrete and MultiBinary actions as they are: it learns a trivial
task of each in a few hundred steps, its worker processes carry the actions as this
process does, and a loaded agent acts in the space. DQN, SAC and TD3 refuse the
actions they do not take in one line that names an algorithm that takes them."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from pararl import PPOConfig, checkpoint, load, train
from pararl.rundir import RunDir

RUN: dict[str, Any] = dict(
    total_steps=2_048,
    num_envs=4,
    num_steps=32,
    minibatch_size=64,
    hidden=(32,),
    eval_every=256,
    target_return=7.5,
    eval_episodes=8,
    checkpoint_every=100_000,
    tensorboard=False,
    progress="none",
    mode="serial",
    workers=1,
    eval_in="inline",
    seed=0,
)


def last_eval(run_dir: Path) -> float:
    with (run_dir / "eval.csv").open() as f:
        return float(list(csv.DictReader(f))[-1]["eval_return"])


@pytest.mark.parametrize(
    ("env", "uniform"),
    [
        # 8 steps; a uniform action hits a target dimension 1/3 and 1/4 of the time
        ("pararl/MultiDiscreteTarget-v0", 8 * (1 / 3 + 1 / 4) / 2),
        ("pararl/MultiBinaryTarget-v0", 8 * 0.5),
    ],
)
def test_ppo_learns_many_dimensional_actions_and_workers_carry_them(
    env: str, uniform: float, tmp_path: Path
) -> None:
    """The serial run learns the task (it stops at the first evaluation there, after
    512 to 768 steps); a sync run (2 worker processes) of the same seed ends with the
    same weights, bit for bit: the actions reach the envs the same through shared
    memory."""
    finals = {}
    for mode in ("serial", "sync"):
        run = tmp_path / mode
        config = {**RUN, "mode": mode, "workers": 2 if mode == "sync" else 1}
        train(PPOConfig(env=env, run_dir=run, **config))
        finals[mode] = checkpoint.load(RunDir(run).checkpoint("final"))["learner"]["model"]
        assert last_eval(run) >= 7.5 > uniform + 3  # of at most 8
    for name, value in finals["serial"].items():
        assert torch.equal(value, finals["sync"][name]), name
    agent = load(tmp_path / "serial")
    made = agent.make_env()
    try:
        obs, _ = made.reset(seed=0)
        for deterministic in (True, False):
            action = agent.act(obs, deterministic)
            assert made.action_space.contains(action), action
        batch = agent.act(np.stack([obs, obs]))
        assert batch.shape == (2, *made.action_space.shape)
    finally:
        made.close()


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (
            ["train", "dqn", "--env", "pararl/MultiDiscreteTarget-v0"],
            "PPO takes MultiDiscrete actions: pararl train ppo --env pararl/MultiDiscreteTarget-v0",
        ),
        (
            ["train", "dqn", "--env", "pararl/MultiBinaryTarget-v0"],
            "PPO takes MultiBinary actions: pararl train ppo --env pararl/MultiBinaryTarget-v0",
        ),
        (
            ["train", "sac", "--env", "CartPole-v1"],
            "DQN and PPO take Discrete actions: pararl train dqn --env CartPole-v1",
        ),
        (
            ["train", "td3", "--env", "pararl/MultiDiscreteTarget-v0"],
            "PPO takes MultiDiscrete actions: pararl train ppo --env pararl/MultiDiscreteTarget-v0",
        ),
        (
            ["train", "sac", "--env", "pararl/MultiBinaryTarget-v0"],
            "PPO takes MultiBinary actions: pararl train ppo --env pararl/MultiBinaryTarget-v0",
        ),
    ],
)
def test_refusals_name_an_algorithm_that_takes_the_actions(
    args: list[str], expect: str, tmp_path: Path, pararl: Any
) -> None:
    result = pararl(*args, "--run-dir", str(tmp_path / "r"))
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert expect in lines[0], result.stderr
    assert not (tmp_path / "r").exists()


def test_ppo_refuses_actions_no_head_takes() -> None:
    from pararl.algos.ppo import check_spaces
    from pararl.errors import UsageError

    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Discrete(3)))
    with pytest.raises(UsageError, match="PPO here takes Discrete, MultiDiscrete"):
        check_spaces(PPOConfig(env="x"), gym.spaces.Box(-1, 1, (2,)), space)
