"""The Stable-Baselines3 anchors, each run as its own process (`command` launches one,
`parse` reads its result line, `sb3-ALGO: {json}`, last on its stdout):

    python -m benchmarks.lib.sb3 dqn train --seed 0 --budget 100000 --save model.zip
    python -m benchmarks.lib.sb3 ppo verify model.zip --episodes 20
    python -m benchmarks.lib.sb3 ppo curve --env HalfCheetah-v5 --budget 1000000
    python -m benchmarks.lib.sb3 sac curve --env HalfCheetah-v5 --budget 300000
    python -m benchmarks.lib.sb3 dqn minatar --env MinAtar/Breakout-v1 --budget 100000
    python -m benchmarks.lib.sb3 dqn minatar --budget 1000000 --state DIR  # in pieces
    python -m benchmarks.lib.sb3 ppo pong --slice-s 60 --learning-starts 1000

CartPole with rl-baselines3-zoo's settings (`train` stops at the first evaluation
reaching `--target`); MuJoCo and MinAtar with pararl's own settings, read from
`pararl.config` where they can be (`curve`, `minatar`: every evaluation with its wall
time); Pong with the zoo's Atari settings (`pong`: the clock, a slice of wall time
after the first update). SB3 is imported only in the process that runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.lib import training


def silent(model: Any) -> Any:
    """`model` with a logger that writes nothing. SB3's own, set up by `learn`, makes an
    empty directory in the temp dir on every call (`SB3-<date>`), output or not."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


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


def curve(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """PPO with VecNormalize, or SAC (`sac_curve`), for the whole budget; every
    deterministic evaluation (PPO's on an env with the training statistics, frozen,
    and true rewards) with its wall time."""
    if algo == "sac":
        return sac_curve(args)
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
    silent(model)
    model.learn(total_timesteps=args.budget, callback=evaluate)
    updates = model.n_epochs * (model.num_timesteps // model.batch_size)
    return {
        "env_steps": int(model.num_timesteps),
        "train_s": round(time.perf_counter() - start, 3),
        "updates": int(updates),
        "curve": points,
    }


def mujoco_sac(learning_starts: int, net: list[int], env: str = "HalfCheetah-v5") -> dict[str, Any]:
    """SB3 SAC with pararl's SAC defaults for `env`'s continuous actions
    (`SACConfig.BY_KIND["continuous"]`, rl-zoo's MuJoCo settings: SB3's own defaults
    but 10k random steps; over them `BY_ENV`'s row for `env`, if it has one): one
    gradient step per env step, the temperature tuned from pararl's initial value
    toward SB3's target entropy -|A|, as pararl's."""
    from pararl.config import SACConfig

    config = SACConfig(env=env).for_env("continuous").config
    s = config.settings
    if s.n_step != 1 or not config.autotune:
        raise ValueError("SB3's SAC learns from one-step returns with a tuned temperature")
    return {
        "learning_rate": s.lr,
        "buffer_size": s.buffer_size,
        "learning_starts": learning_starts,
        "batch_size": s.batch_size,
        "tau": s.tau,
        "gamma": s.gamma,
        "train_freq": 1,
        "gradient_steps": round(s.replay_ratio),
        "ent_coef": f"auto_{config.alpha}",
        "policy_kwargs": {"net_arch": net},
    }


def sac_curve(args: argparse.Namespace) -> dict[str, Any]:
    """SAC on one env (as rl-zoo runs it) for the whole budget, SB3's deterministic
    evaluations with their wall time; `--threads` torch threads (0: torch's default)."""
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.env_util import make_vec_env

    start = time.perf_counter()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    net = [int(w) for w in args.net.split(",")]
    envs = make_vec_env(args.env, n_envs=1, seed=args.seed)
    model = SAC("MlpPolicy", envs, seed=args.seed, device="cpu", verbose=0,
                **mujoco_sac(args.learning_starts, net, args.env))  # fmt: skip
    eval_env = make_vec_env(args.env, n_envs=1, seed=args.seed + 10_000)
    points: list[dict[str, float]] = []
    evaluate = timed_evaluation(eval_env, args.eval_episodes, args.eval_every, start, points)
    silent(model)
    model.learn(total_timesteps=args.budget, callback=evaluate)
    return {
        "env_steps": int(model.num_timesteps),
        "train_s": round(time.perf_counter() - start, 3),
        "updates": int(model._n_updates),
        "curve": points,
        "threads": torch.get_num_threads(),
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
    silent(model)
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


def prefix(algo: str) -> str:
    """The marker of an anchor's result line, e.g. `sb3-ppo: `."""
    return f"sb3-{algo}: "


def command(algo: str, part: str, *args: str, **flags: object) -> list[str]:
    """The process that runs `part` of the `algo` anchor: `args` as given, each flag
    `name=value` as `--name value`."""
    options = [str(x) for k, v in flags.items() for x in ("--" + k.replace("_", "-"), v)]
    return [sys.executable, "-m", "benchmarks.lib.sb3", algo, part, *args, *options]


def parse(stdout: str, algo: str) -> dict[str, Any] | None:
    """The JSON of the anchor's last `sb3-ALGO: {...}` line."""
    lines = [line for line in stdout.splitlines() if line.startswith(prefix(algo))]
    return json.loads(lines[-1][len(prefix(algo)) :]) if lines else None


def curve_run(
    system: str, env: str, seed: int, algo: str, cmd: list[str], timeout_s: float, cwd: Path
) -> tuple[training.Run, dict[str, Any] | None]:
    """A whole `curve` or `minatar` run: its evaluations and totals as a pararl run's
    (`training.Run`), and its result line."""
    done = training.run_process(cmd, timeout_s, cwd)
    result = parse(done.stdout, algo)
    run = training.Run(system, env, seed, done.wall_s, done.returncode == 0 and result is not None)
    if result is not None:
        run.curve, run.env_steps, run.updates = (
            result["curve"],
            result["env_steps"],
            result["updates"],
        )
    run.note = "" if run.ok else done.tail
    return run, result


@functools.cache
def minatar_cnn() -> type:
    """The MinAtar paper's network as SB3 features (a class made on first use: its base
    class is SB3's, imported then)."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

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

    return MinAtarCNN


def minatar_policy() -> dict[str, Any]:
    """A policy of the MinAtar network alone: its features go straight to the heads."""
    return {"features_extractor_class": minatar_cnn(), "net_arch": []}


def minatar_dqn(budget: int) -> dict[str, Any]:
    """SB3 DQN with pararl's MinAtar DQN defaults (`DQNConfig.BY_KIND["minatar"]`):
    SB3 counts its target interval in env steps, pararl in updates."""
    import torch

    from pararl.config import DQNConfig

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
        "policy_kwargs": {**minatar_policy(), **optimizer},
    }


def minatar_ppo() -> dict[str, Any]:
    """SB3 PPO with pararl's MinAtar PPO defaults (`PPOConfig.BY_KIND["minatar"]`);
    both take the value loss as the mean squared error. SB3 clips the value with
    `clip_range_vf` and takes the clipped error alone, where pararl (CleanRL) takes
    the larger of the clipped and the unclipped errors."""
    from pararl.config import PPOConfig

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
        "policy_kwargs": minatar_policy(),
    }


def minatar(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """The whole budget on pararl's MinAtar env (training and evaluation envs as
    pararl makes them); every deterministic evaluation with its wall time.

    With `--state DIR` (DQN) the run goes in pieces: SIGTERM, Ctrl-C or `--stop-at`
    stop it at the next env step (that step's transition is not stored), and it saves
    its model with the optimizer, its replay memory, its counters and its curve in DIR;
    run again with the same DIR, it carries on to the budget on the same clock and
    evaluation schedule. A piece's envs start afresh (the episode in flight is cut)."""
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.callbacks import CallbackList
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.monitor import Monitor

    from pararl.envs.make import env_factory

    start = time.perf_counter()
    state = Path(args.state) if args.state else None
    saved = load_state(state)
    pieces = 0 if saved is None else int(saved["pieces"])
    n_envs = 1 if algo == "dqn" else PPO_ENVS
    seed = args.seed + 1_000 * pieces  # a resumed piece does not replay the first's episodes
    envs = make_vec_env(env_factory(args.env, training=True), n_envs=n_envs, seed=seed)
    common = {"seed": seed, "device": "cpu", "verbose": 0}
    if algo == "dqn":
        hyper = minatar_dqn(args.budget)
        if saved is not None and state is not None:
            kept = {"policy_kwargs": hyper["policy_kwargs"]}  # its network class, made here
            model: Any = DQN.load(state / MODEL, env=envs, device="cpu", custom_objects=kept)
            model.set_random_seed(seed)
            model.load_replay_buffer(state / REPLAY)
            if model.num_timesteps != saved["env_steps"]:
                raise SystemExit(f"sb3: {state} holds a model and a curve of different runs; "
                                 "remove it to start over")  # fmt: skip
        else:
            model = DQN("MlpPolicy", envs, **common, **hyper)
    else:
        model = PPO("MlpPolicy", envs, **common, **minatar_ppo())
    eval_env = Monitor(env_factory(args.env, training=False)())
    eval_env.reset(seed=seed + 10_000)  # seeded apart from training, as pararl's
    points: list[dict[str, float]] = [] if saved is None else saved["curve"]
    clock = start - (0.0 if saved is None else float(saved["train_s"]))  # the run's own
    every = max(args.eval_every // n_envs, 1)
    evaluate = timed_evaluation(eval_env, args.eval_episodes, every, clock, points)
    evaluate.n_calls = model.num_timesteps // n_envs  # the schedule goes on where it was
    from_steps = int(model.num_timesteps)
    silent(model)
    callbacks = CallbackList([evaluate, stopper()(STOP, args.stop_at)])
    print(f"sb3: learning from {from_steps:,} env steps to {args.budget:,}", file=sys.stderr)
    model.learn(total_timesteps=args.budget - from_steps, callback=callbacks,
                reset_num_timesteps=saved is None)  # fmt: skip
    paused = model.num_timesteps < args.budget
    train_s = round(time.perf_counter() - clock, 3)
    if state is not None:
        if paused:
            save_state(model, state, points, train_s, pieces + 1)
        else:  # the memory is no longer needed; the model and the curve stay
            (state / REPLAY).unlink(missing_ok=True)
    return {
        "env_steps": int(model.num_timesteps),
        "from_steps": from_steps,
        "train_s": train_s,
        "updates": int(model._n_updates),
        "curve": points,
        "paused": paused,
    }


MODEL, REPLAY, CURVE = "model.zip", "replay.pkl", "state.json"


def load_state(state: Path | None) -> dict[str, Any] | None:
    """A paused run's counters and curve (`save_state`), or None to start afresh."""
    if state is None or not (state / CURVE).exists():
        return None
    missing = [name for name in (MODEL, REPLAY) if not (state / name).exists()]
    if missing:
        raise SystemExit(f"sb3: {state} lacks {', '.join(missing)}; remove it to start over")
    data: dict[str, Any] = json.loads((state / CURVE).read_text())
    return data


def save_state(model: Any, state: Path, points: list[dict[str, float]], train_s: float,
               pieces: int) -> None:  # fmt: skip
    """Model (with its optimizer), replay memory, then counters and curve, each to a
    temporary name first: the curve file, renamed last, marks a whole save."""
    state.mkdir(parents=True, exist_ok=True)
    model.save(state / f"tmp-{MODEL}")
    model.save_replay_buffer(state / f"tmp-{REPLAY}")
    data = {"env_steps": int(model.num_timesteps), "train_s": train_s, "pieces": pieces,
            "curve": points}  # fmt: skip
    (state / f"tmp-{CURVE}").write_text(json.dumps(data))
    for name in (MODEL, REPLAY, CURVE):
        os.replace(state / f"tmp-{name}", state / name)


STOP = threading.Event()  # set by SIGTERM or Ctrl-C while `stop_signals` holds


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and Ctrl-C set `STOP` inside (the handlers before are put back): a run
    asked to stop while it loads still stops at its first step, and saves."""
    handlers = {sig: signal.signal(sig, lambda *_: STOP.set())
                for sig in (signal.SIGTERM, signal.SIGINT)}  # fmt: skip
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@functools.cache
def stopper() -> type:
    """SB3's callback that ends `learn` once `stopped` is set or `stop_at` env steps are
    done (0: never; the budget ends `learn` by itself, after its last update), a class
    made on first use, as `minatar_cnn`."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Stopper(BaseCallback):
        def __init__(self, stopped: threading.Event, stop_at: int) -> None:
            super().__init__()
            self.stopped, self.stop_at = stopped, stop_at

        def _on_step(self) -> bool:
            done = 0 < self.stop_at <= self.num_timesteps
            return not (self.stopped.is_set() or done)

    return Stopper


@functools.cache
def clock_callback() -> type:
    """SB3's callback that keeps the clock (a class made on first use, as `minatar_cnn`)."""
    from stable_baselines3.common.callbacks import BaseCallback

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

    return Clock


def pong(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """SB3 zoo's Atari DQN or PPO on Pong, timed for a slice after the first update."""
    from stable_baselines3 import DQN, PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    from pararl.envs.atari import register_atari

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
    clock = clock_callback()(args.slice_s)
    silent(model)
    model.learn(total_timesteps=ZOO_ATARI_STEPS, callback=clock)
    return {"points": clock.points}


PARTS: dict[str, tuple[str, dict[str, Any]]] = {  # command: help, its options' defaults
    "train": ("CartPole: train until solved or out of budget", dict(
        seed=0, budget=100_000, eval_every=5_000, eval_episodes=10, target=475.0, save="")),
    "verify": ("deterministic mean return of a saved model", dict(episodes=20, seed=12_345)),
    "curve": ("PPO or SAC on a MuJoCo env for the whole budget (ppo, sac)", dict(
        env="HalfCheetah-v5", seed=0, budget=1_000_000, eval_every=20_000, eval_episodes=10,
        learning_starts=10_000, net="256,256", threads=0)),  # the last three: SAC's
    "minatar": ("learning curve on a MinAtar game", dict(
        env="MinAtar/Breakout-v1", seed=0, budget=100_000, eval_every=10_000, eval_episodes=10,
        state="", stop_at=0)),  # the last two: DQN in pieces (`minatar`)
    "pong": ("training throughput on Pong (zoo settings)", dict(
        env="PongNoFrameskip-v4", seed=0, slice_s=60.0, learning_starts=1_000)),
}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="python -m benchmarks.lib.sb3", description=__doc__)
    top.add_argument("algo", choices=("dqn", "ppo", "sac"))
    sub = top.add_subparsers(dest="command", required=True)
    for name, (text, defaults) in PARTS.items():
        part = sub.add_parser(name, help=text)
        if name == "verify":
            part.add_argument("model")
        for key, default in defaults.items():
            part.add_argument("--" + key.replace("_", "-"), type=type(default), default=default)
    args = top.parse_args(argv)
    if args.algo == "sac" and args.command != "curve":
        print("sb3: sac runs `curve` only", file=sys.stderr)
        return 2
    if args.command == "minatar" and args.state and args.algo != "dqn":
        print("sb3: --state (a run in pieces) is for dqn", file=sys.stderr)
        return 2
    if args.command == "train" and (args.budget < 1 or args.eval_every < 1):
        print("sb3: --budget and --eval-every must be >= 1", file=sys.stderr)
        return 2
    parts = {"train": train, "verify": verify, "curve": curve, "minatar": minatar, "pong": pong}
    pieces = args.command == "minatar"
    with stop_signals() if pieces else contextlib.nullcontext():
        result = parts[args.command](args.algo, args)
    print(prefix(args.algo) + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
