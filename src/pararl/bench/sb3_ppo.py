"""Stable-Baselines3 PPO on CartPole-v1 with the rl-baselines3-zoo hyperparameters,
run as its own process by `pararl bench ppo` (time to solve, the SB3 anchor).

    python -m pararl.bench.sb3_ppo train --seed 0 --budget 100000 --save model.zip
    python -m pararl.bench.sb3_ppo verify model.zip --episodes 20

The zoo's CartPole-v1 entry (hyperparams/ppo.yml): 8 envs (DummyVecEnv), 1e5 steps,
MlpPolicy, n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20,
ent_coef 0.0, learning rate and clip range linear from 0.001 and 0.2 to 0 over the
steps given to `learn` (here `--budget`; pararl's `--anneal-lr` anneals over its
`--total-steps` alike). `train` stops at the first deterministic evaluation (every
`--eval-every` env steps, `--eval-episodes` episodes) whose mean reaches `--target`,
and prints `sb3-ppo: {json}` last on stdout (see `pararl.bench.sb3_runner`).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Sequence
from typing import Any

from pararl.bench import sb3_runner
from pararl.bench.sb3_runner import ENV_ID

ALGO = "ppo"
RESULT_PREFIX = sb3_runner.result_prefix(ALGO)
ZOO_N_ENVS = 8
ZOO_TIMESTEPS = 100_000
ZOO_LEARNING_RATE = 1e-3  # lin_0.001
ZOO_CLIP_RANGE = 0.2  # lin_0.2
ZOO_CARTPOLE: dict[str, Any] = {
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
}


def linear(initial: float, progress_remaining: float) -> float:
    """The zoo's `lin_X` schedule: X at the start, 0 at the end of `learn`."""
    return progress_remaining * initial


def hyperparameters() -> dict[str, Any]:
    """The zoo's settings, schedules as picklable callables (the model is saved)."""
    return {
        **ZOO_CARTPOLE,
        "learning_rate": functools.partial(linear, ZOO_LEARNING_RATE),
        "clip_range": functools.partial(linear, ZOO_CLIP_RANGE),
    }


def train(args: argparse.Namespace) -> dict[str, Any]:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    start = time.perf_counter()
    envs = make_vec_env(ENV_ID, n_envs=ZOO_N_ENVS, seed=args.seed)
    model = PPO("MlpPolicy", envs, seed=args.seed, device="cpu", verbose=0, **hyperparameters())
    return sb3_runner.train_until_target(model, args, ZOO_N_ENVS, start)


def verify(args: argparse.Namespace) -> dict[str, Any]:
    from stable_baselines3 import PPO

    return sb3_runner.verify_saved(PPO, args)


def main(argv: Sequence[str] | None = None) -> int:
    return sb3_runner.main(argv, ALGO, __doc__, train, verify)


if __name__ == "__main__":
    sys.exit(main())
