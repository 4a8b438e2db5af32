"""The Stable-Baselines3 anchors of `benchmarks.pixels`, each run as its own process:

    python -m benchmarks.pixels_sb3 dqn minatar --env MinAtar/Breakout-v1 --budget 100000
    python -m benchmarks.pixels_sb3 ppo pong --slice-s 60 --learning-starts 1000

`minatar` trains for the whole budget on pararl's own MinAtar envs, with the settings
pararl's defaults give MinAtar (read from `pararl.config`, so the two cannot drift
apart) and a features extractor with the MinAtar paper's network, and reports every
deterministic evaluation with its wall time. `pong` runs SB3 zoo's Atari settings
(`AtariWrapper`, 4 stacked frames, `CnnPolicy`) until `--slice-s` seconds have passed
since the first gradient update, and reports the clock: (wall s, agent steps, updates)
about once a second. Each prints one line, `sb3-ALGO: {json}`, last on stdout.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from benchmarks.sb3 import linear, prefix, timed_evaluation
from pararl.config import DQNConfig, PPOConfig
from pararl.envs.atari import register_atari
from pararl.envs.make import env_factory

PPO_ENVS = 8  # CleanRL's ppo_atari and the zoo's Atari PPO; pararl runs 2 workers x 4 envs
# rl-baselines3-zoo hyperparams/dqn.yml and ppo.yml, atari (learning_starts is the
# benchmark's, so that the slice measures learning)
ZOO_ATARI_DQN: dict[str, Any] = {
    "buffer_size": 100_000,
    "learning_rate": 1e-4,
    "batch_size": 32,
    "target_update_interval": 1_000,
    "train_freq": 4,
    "gradient_steps": 1,
    "exploration_fraction": 0.1,
    "exploration_final_eps": 0.01,
    "optimize_memory_usage": False,
}
ZOO_ATARI_PPO: dict[str, Any] = {
    "n_steps": 128,
    "n_epochs": 4,
    "batch_size": 256,
    "vf_coef": 0.5,
    "ent_coef": 0.01,
}
ZOO_ATARI_STEPS, ZOO_ATARI_PPO_LR, ZOO_ATARI_PPO_CLIP = 10_000_000, 2.5e-4, 0.1


class MinAtarCNN(BaseFeaturesExtractor):
    """Young & Tian 2019's network as SB3 features: one 3x3 convolution with 16
    filters, then 128 hidden units, ReLU after each. Takes MinAtar's channels-last
    boolean planes as they come (SB3 transposes only uint8 images) and moves the
    channels first itself, as pararl's `ImageInput` does."""

    def __init__(self, observation_space: gym.spaces.Box) -> None:
        super().__init__(observation_space, features_dim=128)
        height, width, channels = observation_space.shape
        self.net = nn.Sequential(
            nn.Conv2d(channels, 16, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(16 * (height - 2) * (width - 2), 128),
            nn.ReLU(),
        )

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations.float().permute(0, 3, 1, 2))


# a policy of the MinAtar network alone: its features go straight to the heads
MINATAR_POLICY: dict[str, Any] = {"features_extractor_class": MinAtarCNN, "net_arch": []}


def minatar_dqn(budget: int) -> dict[str, Any]:
    """SB3 DQN with pararl's MinAtar DQN defaults (`DQNConfig.BY_KIND["minatar"]`):
    SB3 counts its target interval in env steps, pararl in updates."""
    s, config = DQNConfig.BY_KIND["minatar"], DQNConfig()
    if s["n_step"] != 1 or s["double_dqn"]:
        raise ValueError("SB3's DQN has neither n-step returns nor double-DQN targets")
    steps_per_update = round(1 / s["replay_ratio"])
    optimizer: dict[str, Any] = {}
    if s["optimizer"] == "rmsprop":  # pararl's centred RMSProp
        optimizer = {
            "optimizer_class": torch.optim.RMSprop,
            "optimizer_kwargs": {"alpha": 0.95, "eps": 0.01, "centered": True},
        }
    return {
        "learning_rate": s["lr"],
        "buffer_size": s["buffer_size"],
        "learning_starts": s["learning_starts"],
        "batch_size": s["batch_size"],
        "gamma": s["gamma"],
        "train_freq": steps_per_update,
        "gradient_steps": 1,
        "target_update_interval": s["target_update"] * steps_per_update,
        "exploration_initial_eps": config.eps_start,
        "exploration_final_eps": s["eps_end"],
        "exploration_fraction": s["eps_decay_steps"] / budget,
        "max_grad_norm": config.max_grad_norm,
        "policy_kwargs": {**MINATAR_POLICY, **optimizer},
    }


def minatar_ppo() -> dict[str, Any]:
    """SB3 PPO with pararl's MinAtar PPO defaults (`PPOConfig.BY_KIND["minatar"]`);
    both take the value loss as the mean squared error. SB3 clips the value with
    `clip_range_vf` and takes the clipped error alone, where pararl (CleanRL) takes
    the larger of the clipped and the unclipped errors."""
    s, config = PPOConfig.BY_KIND["minatar"], PPOConfig()
    lr = functools.partial(linear, s["lr"]) if config.anneal_lr else s["lr"]
    return {
        "learning_rate": lr,
        "n_steps": s["num_steps"],
        "batch_size": s["minibatch_size"],
        "n_epochs": s["update_epochs"],
        "gamma": s["gamma"],
        "gae_lambda": s["gae_lambda"],
        "clip_range": s["clip_coef"],
        "clip_range_vf": s["clip_coef"] if s["clip_vloss"] else None,
        "ent_coef": s["ent_coef"],
        "vf_coef": s["vf_coef"],
        "max_grad_norm": config.max_grad_norm,
        "policy_kwargs": MINATAR_POLICY,
    }


def minatar(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """The whole budget on pararl's MinAtar env (training and evaluation envs as
    pararl makes them); every deterministic evaluation with its wall time."""
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.monitor import Monitor

    start = time.perf_counter()
    n_envs = 1 if algo == "dqn" else PPO_ENVS
    envs = make_vec_env(env_factory(args.env, training=True), n_envs=n_envs, seed=args.seed)
    common = {"seed": args.seed, "device": "cpu", "verbose": 0}
    if algo == "dqn":
        model: Any = DQN("MlpPolicy", envs, **common, **minatar_dqn(args.budget))
    else:
        model = PPO("MlpPolicy", envs, **common, **minatar_ppo())
    eval_env = Monitor(env_factory(args.env, training=False)())
    eval_env.reset(seed=args.seed + 10_000)  # seeded apart from training, as pararl's
    points: list[dict[str, float]] = []
    every = max(args.eval_every // n_envs, 1)
    evaluate = timed_evaluation(eval_env, args.eval_episodes, every, start, points)
    model.learn(total_timesteps=args.budget, callback=evaluate)
    return {
        "env_steps": int(model.num_timesteps),
        "train_s": round(time.perf_counter() - start, 3),
        "updates": int(model._n_updates),
        "curve": points,
    }


class Clock(BaseCallback):
    """(wall s, agent steps, updates) about once a second, and one at the first
    update; stops training `slice_s` seconds after it."""

    def __init__(self, slice_s: float) -> None:
        super().__init__()
        self.slice_s, self.start = slice_s, time.perf_counter()
        self.points: list[tuple[float, int, int]] = []
        self.first: float | None = None

    def _on_step(self) -> bool:
        wall, updates = time.perf_counter() - self.start, int(self.model._n_updates)
        if self.first is None and updates > 0:
            self.first = wall
            self.points.append((round(wall, 3), self.num_timesteps, updates))
        elif not self.points or wall - self.points[-1][0] >= 1.0:
            self.points.append((round(wall, 3), self.num_timesteps, updates))
        return self.first is None or wall - self.first < self.slice_s


def pong(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """SB3 zoo's Atari DQN or PPO on Pong, timed for a slice after the first update."""
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    register_atari()  # the NoFrameskip-v4 ids come with ale-py
    n_envs = 1 if algo == "dqn" else PPO_ENVS
    envs = VecFrameStack(make_atari_env(args.env, n_envs=n_envs, seed=args.seed), n_stack=4)
    common = {"seed": args.seed, "device": "cpu", "verbose": 0}
    if algo == "dqn":
        hyper = {**ZOO_ATARI_DQN, "learning_starts": args.learning_starts}
        model: Any = DQN("CnnPolicy", envs, **common, **hyper)
    else:
        lr, clip = (functools.partial(linear, v) for v in (ZOO_ATARI_PPO_LR, ZOO_ATARI_PPO_CLIP))
        model = PPO("CnnPolicy", envs, **common, **ZOO_ATARI_PPO, learning_rate=lr, clip_range=clip)
    clock = Clock(args.slice_s)
    model.learn(total_timesteps=ZOO_ATARI_STEPS, callback=clock)
    return {"points": clock.points}


def main(argv: Sequence[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="python -m benchmarks.pixels_sb3", description=__doc__)
    top.add_argument("algo", choices=("dqn", "ppo"))
    sub = top.add_subparsers(dest="command", required=True)
    m = sub.add_parser("minatar", help="learning curve on a MinAtar game")
    m.add_argument("--env", default="MinAtar/Breakout-v1")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--budget", type=int, default=100_000)
    m.add_argument("--eval-every", type=int, default=10_000)
    m.add_argument("--eval-episodes", type=int, default=10)
    p = sub.add_parser("pong", help="training throughput on Pong (zoo settings)")
    p.add_argument("--env", default="PongNoFrameskip-v4")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slice-s", type=float, default=60.0)
    p.add_argument("--learning-starts", type=int, default=1_000)
    args = top.parse_args(argv)
    result = (minatar if args.command == "minatar" else pong)(args.algo, args)
    print(prefix(args.algo) + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
