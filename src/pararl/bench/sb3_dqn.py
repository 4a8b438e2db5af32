"""Stable-Baselines3 DQN on CartPole-v1 with the rl-baselines3-zoo hyperparameters,
run as its own process by `pararl bench dqn` (time to solve, the SB3 anchor).

    python -m pararl.bench.sb3_dqn train --seed 0 --budget 100000 --save model.zip
    python -m pararl.bench.sb3_dqn verify model.zip --episodes 20

`train` evaluates the deterministic policy every `--eval-every` env steps on
`--eval-episodes` episodes (SB3's EvalCallback) and stops as soon as the mean
reaches `--target`. Each command prints one result line, `sb3-dqn: {json}`, last on
stdout; the benchmark parses it. The command line and the training/checking loop
are shared with the PPO anchor (`pararl.bench.sb3_runner`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from pararl.bench import sb3_runner
from pararl.bench.sb3_runner import ENV_ID

ALGO = "dqn"
RESULT_PREFIX = sb3_runner.result_prefix(ALGO)
ZOO_TIMESTEPS = 50_000  # the zoo's n_timesteps for CartPole-v1 DQN
ZOO_EXPLORATION_FRACTION = 0.16
# rl-baselines3-zoo hyperparams/dqn.yml, CartPole-v1 (exploration set in `hyperparameters`)
ZOO_CARTPOLE: dict[str, Any] = {
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_final_eps": 0.04,
    "policy_kwargs": {"net_arch": [256, 256]},
}


def hyperparameters(budget: int) -> dict[str, Any]:
    """The zoo's settings for a run of `budget` env steps.

    SB3 decays epsilon over `exploration_fraction` of the steps passed to `learn`;
    the zoo's 0.16 is of its 50k steps, i.e. 8,000 steps. The fraction is rescaled
    so that epsilon reaches its floor after those same 8,000 steps whatever the
    budget (a 100k budget would otherwise explore twice as long as the zoo does).
    """
    fraction = ZOO_EXPLORATION_FRACTION * ZOO_TIMESTEPS / budget
    return {**ZOO_CARTPOLE, "exploration_fraction": fraction}


def train(args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym
    from stable_baselines3 import DQN

    start = time.perf_counter()
    model = DQN(
        "MlpPolicy",
        gym.make(ENV_ID),
        seed=args.seed,
        device="cpu",
        verbose=0,
        **hyperparameters(args.budget),
    )
    return sb3_runner.train_until_target(model, args, 1, start)


def verify(args: argparse.Namespace) -> dict[str, Any]:
    from stable_baselines3 import DQN

    return sb3_runner.verify_saved(DQN, args)


def main(argv: Sequence[str] | None = None) -> int:
    return sb3_runner.main(argv, ALGO, __doc__, train, verify)


if __name__ == "__main__":
    sys.exit(main())
