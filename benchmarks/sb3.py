"""The Stable-Baselines3 anchors: DQN and PPO on CartPole-v1 with the
rl-baselines3-zoo hyperparameters, each run as its own process by `benchmarks.solve`;
and PPO on MuJoCo with pararl's continuous-control settings (`benchmarks.mujoco`):

    python -m benchmarks.sb3 dqn train --seed 0 --budget 100000 --save model.zip
    python -m benchmarks.sb3 ppo verify model.zip --episodes 20
    python -m benchmarks.sb3 ppo curve --env HalfCheetah-v5 --budget 1000000

`train` stops at the first deterministic evaluation (SB3's EvalCallback) reaching
`--target`; `curve` runs the whole budget and reports every evaluation with its wall
time. Each prints one line, `sb3-ALGO: {json}`, last on stdout.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

ENV_ID = "CartPole-v1"
# rl-baselines3-zoo hyperparams/dqn.yml, CartPole-v1 (exploration set in `dqn_hyper`)
ZOO_DQN: dict[str, Any] = {
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
ZOO_DQN_TIMESTEPS, ZOO_DQN_EXPLORATION = 50_000, 0.16
# hyperparams/ppo.yml, CartPole-v1: 8 envs, lr and clip linear from 1e-3 and 0.2 to 0
# over the steps given to `learn` (pararl's --anneal-lr anneals over --total-steps alike)
ZOO_PPO: dict[str, Any] = {
    "n_steps": 32,
    "batch_size": 256,
    "gae_lambda": 0.8,
    "gamma": 0.98,
    "n_epochs": 20,
    "ent_coef": 0.0,
}
ZOO_PPO_ENVS, ZOO_PPO_LR, ZOO_PPO_CLIP = 8, 1e-3, 0.2


def prefix(algo: str) -> str:
    """The marker of an anchor's result line, e.g. `sb3-ppo: `."""
    return f"sb3-{algo}: "


def dqn_hyper(budget: int) -> dict[str, Any]:
    """The zoo's DQN settings for a run of `budget` steps. SB3 decays epsilon over a
    fraction of the steps given to `learn`; the zoo's 0.16 of its 50k steps is 8,000
    steps, kept whatever the budget (100k would otherwise explore twice as long)."""
    return {**ZOO_DQN, "exploration_fraction": ZOO_DQN_EXPLORATION * ZOO_DQN_TIMESTEPS / budget}


def linear(initial: float, progress_remaining: float) -> float:
    """The zoo's `lin_X` schedule: X at the start, 0 at the end of `learn`."""
    return progress_remaining * initial


def ppo_hyper() -> dict[str, Any]:
    """The zoo's PPO settings, schedules as picklable callables (the model is saved)."""
    lr, clip = (functools.partial(linear, v) for v in (ZOO_PPO_LR, ZOO_PPO_CLIP))
    return {**ZOO_PPO, "learning_rate": lr, "clip_range": clip}


# CleanRL's ppo_continuous_action settings, laid out as pararl's continuous defaults
# (8 envs x 256 steps = CleanRL's 2048-step rollout; 64-sample minibatches); value loss
# weight 0.25 on SB3's mean squared error = CleanRL's 0.5 on half of it; no value
# clipping (SB3's default, and pararl's continuous default)
MUJOCO_PPO: dict[str, Any] = {
    "n_steps": 256,
    "batch_size": 64,
    "n_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "ent_coef": 0.0,
    "vf_coef": 0.25,
    "max_grad_norm": 0.5,
    "clip_range": 0.2,
    "clip_range_vf": None,
}
MUJOCO_ENVS, MUJOCO_LR = 8, 3e-4


def curve(args: argparse.Namespace) -> dict[str, Any]:
    """PPO with VecNormalize for the whole budget; every deterministic evaluation (on
    an env with the training statistics, frozen, and true rewards) with its wall time."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    start = time.perf_counter()
    envs = VecNormalize(
        make_vec_env(args.env, n_envs=MUJOCO_ENVS, seed=args.seed), gamma=MUJOCO_PPO["gamma"]
    )
    lr = functools.partial(linear, MUJOCO_LR)
    model = PPO("MlpPolicy", envs, seed=args.seed, device="cpu", verbose=0,
                learning_rate=lr, **MUJOCO_PPO)  # fmt: skip
    eval_env = VecNormalize(
        make_vec_env(args.env, n_envs=1, seed=args.seed + 10_000),
        training=False,
        norm_reward=False,
    )
    points: list[dict[str, float]] = []
    evaluate = timed_evaluation(
        eval_env, args.eval_episodes, max(args.eval_every // MUJOCO_ENVS, 1), start, points
    )
    model.learn(total_timesteps=args.budget, callback=evaluate)
    updates = model.n_epochs * (model.num_timesteps // model.batch_size)
    return {
        "env_steps": int(model.num_timesteps),
        "train_s": round(time.perf_counter() - start, 3),
        "updates": int(updates),
        "curve": points,
    }


def timed_evaluation(
    eval_env: Any, episodes: int, every: int, start: float, points: list[dict[str, float]]
) -> Any:
    """SB3's deterministic `EvalCallback` every `every` calls, each evaluation also
    appended to `points` with its env steps and wall time since `start`."""
    from stable_baselines3.common.callbacks import EvalCallback

    class Timed(EvalCallback):
        def _on_step(self) -> bool:
            go_on = bool(super()._on_step())
            if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                wall = round(time.perf_counter() - start, 3)
                steps, mean = self.num_timesteps, float(self.last_mean_reward)
                points.append({"env_steps": steps, "wall_s": wall, "eval_return": mean})
            return go_on

    return Timed(eval_env, n_eval_episodes=episodes, eval_freq=every, deterministic=True, verbose=0)


def train(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train until an evaluation reaches the target (or the budget is spent), save."""
    import gymnasium as gym
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.monitor import Monitor

    start = time.perf_counter()
    common = {"seed": args.seed, "device": "cpu", "verbose": 0}
    if algo == "dqn":
        model: Any = DQN("MlpPolicy", gym.make(ENV_ID), **common, **dqn_hyper(args.budget))
        n_envs = 1
    else:
        envs = make_vec_env(ENV_ID, n_envs=ZOO_PPO_ENVS, seed=args.seed)
        model, n_envs = PPO("MlpPolicy", envs, **common, **ppo_hyper()), ZOO_PPO_ENVS
    # SB3 counts eval_freq in calls, one per vector step of n_envs env steps (as the zoo)
    eval_freq = max(args.eval_every // n_envs, 1)
    eval_env = Monitor(gym.make(ENV_ID))
    eval_env.reset(seed=args.seed + 10_000)  # seeded apart from training, as pararl's
    evaluate = EvalCallback(
        eval_env,
        callback_on_new_best=StopTrainingOnRewardThreshold(reward_threshold=args.target),
        n_eval_episodes=args.eval_episodes,
        eval_freq=eval_freq,
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
        "evaluations": evaluate.n_calls // eval_freq,
    }


def verify(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """Deterministic mean return of the model saved at `args.model`."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    model = (DQN if algo == "dqn" else PPO).load(args.model, device="cpu")
    env = Monitor(gym.make(ENV_ID))
    env.reset(seed=args.seed)
    returns, _ = evaluate_policy(
        model, env, n_eval_episodes=args.episodes, deterministic=True, return_episode_rewards=True
    )
    values = np.asarray(returns, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std()), "episodes": len(values)}


def main(argv: Sequence[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="python -m benchmarks.sb3", description=__doc__)
    top.add_argument("algo", choices=("dqn", "ppo"))
    sub = top.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train until solved or out of budget")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--budget", type=int, default=100_000, help="env steps at most")
    t.add_argument("--eval-every", type=int, default=5_000, help="env steps between evaluations")
    t.add_argument("--eval-episodes", type=int, default=10)
    t.add_argument("--target", type=float, default=475.0)
    t.add_argument("--save", default=None, help="write the final model (.zip) here")
    v = sub.add_parser("verify", help="deterministic mean return of a saved model")
    v.add_argument("model")
    v.add_argument("--episodes", type=int, default=20)
    v.add_argument("--seed", type=int, default=12_345)
    c = sub.add_parser("curve", help="PPO on a MuJoCo env for the whole budget (ppo only)")
    c.add_argument("--env", default="HalfCheetah-v5")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--budget", type=int, default=1_000_000)
    c.add_argument("--eval-every", type=int, default=20_000)
    c.add_argument("--eval-episodes", type=int, default=10)
    args = top.parse_args(argv)
    if args.command == "train" and (args.budget < 1 or args.eval_every < 1):
        print("sb3: --budget and --eval-every must be >= 1", file=sys.stderr)
        return 2
    if args.command == "curve":
        result = curve(args)
    else:
        result = (train if args.command == "train" else verify)(args.algo, args)
    print(prefix(args.algo) + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
