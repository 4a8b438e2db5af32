"""What the Stable-Baselines3 anchors (`sb3_dqn`, `sb3_ppo`) share: the command
line, training until a periodic deterministic evaluation reaches the target, the
check of a saved model, and the one result line the benchmark parses.

Each anchor runs as its own process:

    python -m pararl.bench.sb3_ALGO train --seed 0 --budget 100000 --save model.zip
    python -m pararl.bench.sb3_ALGO verify model.zip --episodes 20

and prints `sb3-ALGO: {json}` last on stdout. Stable-Baselines3 is imported only
inside the functions, so the benchmark imports these modules cheaply.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

ENV_ID = "CartPole-v1"


def result_prefix(algo: str) -> str:
    """The marker of an anchor's result line, e.g. `sb3-ppo: `."""
    return f"sb3-{algo}: "


def emit(prefix: str, result: dict[str, Any]) -> None:
    print(prefix + json.dumps(result), flush=True)


def eval_env(seed: int) -> Any:
    """The evaluation env, seeded apart from the training envs (as pararl does)."""
    import gymnasium as gym
    from stable_baselines3.common.monitor import Monitor

    env = Monitor(gym.make(ENV_ID))
    env.reset(seed=seed + 10_000)
    return env


def train_until_target(
    model: Any, args: argparse.Namespace, n_envs: int, start: float
) -> dict[str, Any]:
    """`model.learn` with SB3's EvalCallback stopping at the first evaluation whose
    deterministic mean reaches `args.target`; saves the model to `args.save`.

    SB3 counts `eval_freq` in calls, one per vector step of `n_envs` env steps, so
    evaluating every `eval_every` env steps means every `eval_every // n_envs` calls
    (what rl-baselines3-zoo does too). `start`: `time.perf_counter()` when the
    anchor began building its model (its `train_s` counts from there).
    """
    from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold

    eval_freq = max(args.eval_every // n_envs, 1)
    stop = StopTrainingOnRewardThreshold(reward_threshold=args.target, verbose=0)
    evaluate = EvalCallback(
        eval_env(args.seed),
        callback_on_new_best=stop,
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


def verify_saved(model_cls: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Deterministic mean return of the model saved at `args.model`."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    model = model_cls.load(args.model, device="cpu")
    env = Monitor(gym.make(ENV_ID))
    env.reset(seed=args.seed)
    returns, _ = evaluate_policy(
        model, env, n_eval_episodes=args.episodes, deterministic=True, return_episode_rewards=True
    )
    values = np.asarray(returns, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std()), "episodes": len(values)}


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=prog, description=description)
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
    return top


Handler = Callable[[argparse.Namespace], dict[str, Any]]


def main(
    argv: Sequence[str] | None,
    algo: str,
    description: str | None,
    train: Handler,
    verify: Handler,
) -> int:
    """Parse, check, run `train` or `verify`, print the result line; the exit code."""
    args = parser(f"python -m pararl.bench.sb3_{algo}", description).parse_args(argv)
    if args.command == "train" and (args.budget < 1 or args.eval_every < 1):
        print(f"sb3_{algo}: --budget and --eval-every must be >= 1", file=sys.stderr)
        return 2
    emit(result_prefix(algo), train(args) if args.command == "train" else verify(args))
    return 0
