"""Stable-Baselines3 DQN on CartPole-v1 with the rl-baselines3-zoo hyperparameters,
run as its own process by `pararl bench dqn` (time to solve, the SB3 anchor).

    python -m pararl.bench.sb3_dqn train --seed 0 --budget 100000 --save model.zip
    python -m pararl.bench.sb3_dqn verify model.zip --episodes 20

`train` evaluates the deterministic policy every `--eval-every` env steps on
`--eval-episodes` episodes (SB3's EvalCallback) and stops as soon as the mean
reaches `--target`. Each command prints one result line, `sb3-dqn: {json}`, last on
stdout; the benchmark parses it. Stable-Baselines3 is imported only when a command
runs, so the benchmark can import this module's constants cheaply.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

RESULT_PREFIX = "sb3-dqn: "
ENV_ID = "CartPole-v1"
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


def emit(result: dict[str, Any]) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def train(args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
    from stable_baselines3.common.monitor import Monitor

    start = time.perf_counter()
    eval_env = Monitor(gym.make(ENV_ID))
    eval_env.reset(seed=args.seed + 10_000)
    model = DQN(
        "MlpPolicy",
        gym.make(ENV_ID),
        seed=args.seed,
        device="cpu",
        verbose=0,
        **hyperparameters(args.budget),
    )
    stop = StopTrainingOnRewardThreshold(reward_threshold=args.target, verbose=0)
    evaluate = EvalCallback(
        eval_env,
        callback_on_new_best=stop,
        n_eval_episodes=args.eval_episodes,
        eval_freq=args.eval_every,
        deterministic=True,
        verbose=0,
    )
    model.learn(total_timesteps=args.budget, callback=evaluate)
    train_s = time.perf_counter() - start
    if args.save:
        model.save(args.save)
    best = float(evaluate.best_mean_reward)
    return {
        "solved": best >= args.target,
        "env_steps": int(model.num_timesteps),
        "train_s": round(train_s, 3),
        "best_eval": best if best > -float("inf") else None,
        "last_eval": float(evaluate.last_mean_reward),
        "evaluations": evaluate.n_calls // args.eval_every,
    }


def verify(args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import DQN
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    model = DQN.load(args.model, device="cpu")
    env = Monitor(gym.make(ENV_ID))
    env.reset(seed=args.seed)
    returns, _ = evaluate_policy(
        model, env, n_eval_episodes=args.episodes, deterministic=True, return_episode_rewards=True
    )
    values = np.asarray(returns, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std()), "episodes": len(values)}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m pararl.bench.sb3_dqn", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train until solved or out of budget")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--budget", type=int, default=100_000, help="env steps at most")
    t.add_argument("--eval-every", type=int, default=5_000)
    t.add_argument("--eval-episodes", type=int, default=10)
    t.add_argument("--target", type=float, default=475.0)
    t.add_argument("--save", default=None, help="write the final model (.zip) here")
    v = sub.add_parser("verify", help="deterministic mean return of a saved model")
    v.add_argument("model")
    v.add_argument("--episodes", type=int, default=20)
    v.add_argument("--seed", type=int, default=12_345)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "train" and (args.budget < 1 or args.eval_every < 1):
        print("sb3_dqn: --budget and --eval-every must be >= 1", file=sys.stderr)
        return 2
    emit(train(args) if args.command == "train" else verify(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
