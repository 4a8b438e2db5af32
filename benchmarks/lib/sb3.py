"""The Stable-Baselines3 anchors, each run as its own process (`command` launches one,
`parse` reads its last line, `sb3-ALGO: {json}`), e.g. `python -m benchmarks.lib.sb3 dqn
learn --anchor zoo --env CartPole-v1 --target 475`; `ANCHORS` names each anchor's envs
and settings. SB3 is imported only in that process.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# rl-baselines3-zoo hyperparams/dqn.yml, CartPole-v1 (exploration set in `dqn_hyper`)
ZOO_DQN: dict[str, Any] = {"learning_rate": 2.3e-3, "batch_size": 64,
                           "buffer_size": 100_000, "learning_starts": 1000, "gamma": 0.99,
                           "target_update_interval": 10, "train_freq": 256,
                           "gradient_steps": 128, "exploration_final_eps": 0.04,
                           "policy_kwargs": {"net_arch": [256, 256]}}  # fmt: skip
ZOO_DQN_TIMESTEPS, ZOO_DQN_EXPLORATION = 50_000, 0.16
# hyperparams/ppo.yml, CartPole-v1: 8 envs, lr and clip linear from 1e-3 and 0.2 to 0
# over the steps given to `learn` (pararl's --anneal-lr anneals over --total-steps alike)
ZOO_PPO: dict[str, Any] = {"n_steps": 32, "batch_size": 256, "gae_lambda": 0.8,
                           "gamma": 0.98, "n_epochs": 20, "ent_coef": 0.0}  # fmt: skip
ZOO_PPO_ENVS, ZOO_PPO_LR, ZOO_PPO_CLIP = 8, 1e-3, 0.2
# hyperparams/ppo_lstm.yml, CartPoleNoVel-v1 (sb3-contrib's RecurrentPPO, "Tuned"; 100k
# steps): ppo.yml's CartPole-v1 numbers, VecNormalize of observations and rewards (with
# the algorithm's gamma), and its MlpLstmPolicy: no orthogonal init, ReLU, an LSTM of 64
# each for the actor and the critic, then 64 units each; SB3's defaults for the rest
ZOO_LSTM = ZOO_PPO
ZOO_LSTM_POLICY: dict[str, Any] = {"ortho_init": False, "activation_fn": "ReLU",
                                   "lstm_hidden_size": 64, "enable_critic_lstm": True,
                                   "net_arch": {"pi": [64], "vf": [64]}}  # fmt: skip
ZOO_LSTM_STEPS = 100_000
PPO_ENVS = 8  # CleanRL's ppo_atari and the zoo's Atari PPO; pararl runs 2 workers x 4 envs
# the zoo's dqn.yml and ppo.yml, atari (learning_starts is the benchmark's: the slice
# measures learning)
ZOO_ATARI_DQN: dict[str, Any] = {"buffer_size": 100_000, "learning_rate": 1e-4,
                                 "batch_size": 32, "target_update_interval": 1_000,
                                 "train_freq": 4, "gradient_steps": 1,
                                 "exploration_fraction": 0.1, "exploration_final_eps": 0.01,
                                 "optimize_memory_usage": False}  # fmt: skip
ZOO_ATARI_PPO: dict[str, Any] = {"n_steps": 128, "n_epochs": 4, "batch_size": 256,
                                 "vf_coef": 0.5, "ent_coef": 0.01}  # fmt: skip
ZOO_ATARI_STEPS, ZOO_ATARI_PPO_LR, ZOO_ATARI_PPO_CLIP = 10_000_000, 2.5e-4, 0.1
# CleanRL's ppo_continuous_action as pararl's continuous defaults lay it out (8 envs x
# 256 steps, 64-sample minibatches); value weight 0.25 on SB3's mean squared error =
# CleanRL's 0.5 on half of it; no value clipping; lr 3e-4 annealed
MUJOCO_PPO: dict[str, Any] = {"n_steps": 256, "batch_size": 64, "n_epochs": 10,
                              "gamma": 0.99, "gae_lambda": 0.95, "ent_coef": 0.0,
                              "vf_coef": 0.25, "max_grad_norm": 0.5, "clip_range": 0.2,
                              "clip_range_vf": None}  # fmt: skip
MUJOCO_ENVS, MUJOCO_LR = 8, 3e-4
# the zoo's td3.yml, MuJoCo: SB3's TD3 defaults (tau 0.005, gamma 0.99, policy delay 2,
# target noise 0.2 clipped at 0.5, a 1M memory), 400x300, 10k random steps, one update
# per env step, Gaussian exploration noise of 0.1
ZOO_TD3: dict[str, Any] = {"learning_rate": 1e-3, "batch_size": 256,
                           "learning_starts": 10_000, "train_freq": 1, "gradient_steps": 1,
                           "policy_kwargs": {"net_arch": [400, 300]}}  # fmt: skip
ZOO_TD3_NOISE = 0.1
# `benchmarks masks`, the same for pararl and sb3-contrib's MaskablePPO (lr 2.5e-4,
# CleanRL's Atari rate, left both at -200 after 300k steps)
MASKED_PPO: dict[str, Any] = {"n_steps": 128, "batch_size": 256, "n_epochs": 4,
                              "gamma": 0.99, "gae_lambda": 0.95, "clip_range": 0.2,
                              "clip_range_vf": None, "ent_coef": 0.01, "vf_coef": 0.5,
                              "max_grad_norm": 0.5,
                              "policy_kwargs": {"net_arch": [64, 64]}}  # fmt: skip
MASKED_ENVS, MASKED_LR = 8, 1e-3


def silent(model: Any) -> Any:
    """`model` with a logger that writes nothing (SB3's own makes a directory per `learn`)."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def linear(initial: float, progress_remaining: float) -> float:
    """The zoo's `lin_X` schedule: X at the start, 0 at the end of `learn`."""
    return progress_remaining * initial


def annealed(lr: float, clip: float | None = None) -> dict[str, Any]:
    """The zoo's linear schedules of the learning rate (and the clip range), as
    picklable callables (the model is saved)."""
    out = {"learning_rate": functools.partial(linear, lr)}
    return out if clip is None else out | {"clip_range": functools.partial(linear, clip)}


def dqn_hyper(budget: int) -> dict[str, Any]:
    """The zoo's DQN settings for `budget` steps: epsilon decays over the zoo's 8,000 steps
    (0.16 of its 50k), whatever the budget (SB3 takes a fraction of the steps of `learn`)."""
    return {**ZOO_DQN, "exploration_fraction": ZOO_DQN_EXPLORATION * ZOO_DQN_TIMESTEPS / budget}


def ppo_hyper() -> dict[str, Any]:
    """The zoo's CartPole-v1 PPO settings."""
    return {**ZOO_PPO, **annealed(ZOO_PPO_LR, ZOO_PPO_CLIP)}


def mujoco_sac(learning_starts: int, net: list[int], env: str = "HalfCheetah-v5") -> dict[str, Any]:
    """SB3 SAC with pararl's SAC defaults for `env` (rl-zoo's MuJoCo settings): an update
    per env step, the temperature tuned from pararl's initial value toward -|A|."""
    from pararl.config import SACConfig

    config = SACConfig(env=env).for_env("continuous").config
    s = config.settings
    if s.n_step != 1 or not config.autotune:
        raise ValueError("SB3's SAC learns from one-step returns with a tuned temperature")
    return {"learning_rate": s.lr, "buffer_size": s.buffer_size,
            "learning_starts": learning_starts, "batch_size": s.batch_size, "tau": s.tau,
            "gamma": s.gamma, "train_freq": 1, "gradient_steps": round(s.replay_ratio),
            "ent_coef": f"auto_{config.alpha}", "policy_kwargs": {"net_arch": net}}  # fmt: skip


def mujoco(algo: str, envs: Any, budget: int) -> dict[str, Any]:
    if algo == "ppo":
        return {**MUJOCO_PPO, **annealed(MUJOCO_LR)}
    if algo == "sac":
        return mujoco_sac(10_000, [256, 256], envs.envs[0].spec.id)
    import numpy as np
    from stable_baselines3.common.noise import NormalActionNoise

    n = envs.action_space.shape[0]  # the zoo's TD3 with its exploration noise
    return {**ZOO_TD3, "action_noise": NormalActionNoise(np.zeros(n), ZOO_TD3_NOISE * np.ones(n))}


def recurrent(algo: str, envs: Any, budget: int) -> dict[str, Any]:
    """The zoo's CartPoleNoVel-v1 RecurrentPPO settings, the activation as torch's class."""
    from torch import nn

    policy = {**ZOO_LSTM_POLICY, "activation_fn": getattr(nn, ZOO_LSTM_POLICY["activation_fn"])}
    return {**ZOO_LSTM, **annealed(ZOO_PPO_LR, ZOO_PPO_CLIP), "policy_kwargs": policy}


def masked_env(env: str, training: bool) -> Any:
    """A factory of `env` whose last `info["action_mask"]` (Taxi's) sb3-contrib reads."""
    return functools.partial(_masked_env, env)


def _masked_env(env_id: str) -> Any:
    import gymnasium as gym
    from sb3_contrib.common.wrappers import ActionMasker

    class InfoMask(gym.Wrapper[Any, Any, Any, Any]):  # the last reset's or step's mask
        last_mask: Any = None

        def reset(self, **kwargs: Any) -> Any:
            obs, info = self.env.reset(**kwargs)
            self.last_mask = info["action_mask"].astype(bool)
            return obs, info

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            self.last_mask = info["action_mask"].astype(bool)
            return obs, reward, terminated, truncated, info

    return ActionMasker(InfoMask(gym.make(env_id)), lambda env: env.get_wrapper_attr("last_mask"))


def pararl_env(env: str, training: bool) -> Any:
    from pararl.envs.make import env_factory

    return env_factory(env, training=training)


def by_id(env: str, training: bool) -> str:
    return env


@dataclass(frozen=True)
class Anchor:
    """How SB3 runs one kind of comparison: its envs (`n_envs(algo)`, and an evaluation env
    seeded apart, as pararl's) and its settings (of `algo`, the training envs, the budget)."""

    n_envs: Callable[[str], int]
    make: Callable[[str, bool], Any]  # (env id, training) -> an env factory or id
    settings: Callable[[str, Any, int], dict[str, Any]]
    normalize: bool = False  # VecNormalize over the training envs (the eval env frozen)
    model: str = ""  # "module:Class" of a model not in SB3 itself (sb3-contrib's)
    policy: str = "MlpPolicy"  # SB3's policy class by name (Dict observations: MultiInputPolicy)
    masked: bool = False  # acts on the env's action masks (sb3-contrib's MaskablePPO)
    norm_gamma: float = 0.99  # the discount VecNormalize scales rewards by


def zoo(algo: str, envs: Any, budget: int) -> dict[str, Any]:
    return dqn_hyper(budget) if algo == "dqn" else ppo_hyper()


ANCHORS: dict[str, Anchor] = {
    # rl-baselines3-zoo's CartPole-v1 settings
    "zoo": Anchor(lambda a: 1 if a == "dqn" else ZOO_PPO_ENVS, by_id, zoo),
    # pararl's continuous PPO settings (CleanRL's), VecNormalize
    "vecnormalize": Anchor(lambda a: MUJOCO_ENVS, by_id, mujoco, normalize=True,
                           norm_gamma=MUJOCO_PPO["gamma"]),
    # rl-zoo's MuJoCo settings, one env
    "rl-zoo": Anchor(lambda a: 1, by_id, mujoco),
    # pararl's MinAtar settings and envs, the MinAtar paper's network
    "minatar": Anchor(lambda a: 1 if a == "dqn" else PPO_ENVS, pararl_env,
                      lambda a, e, b: minatar_dqn(b) if a == "dqn" else minatar_ppo()),
    # sb3-contrib's MaskablePPO, masks from the env's info, the masks row's settings
    "masked": Anchor(lambda a: MASKED_ENVS, masked_env,
                     lambda a, e, b: {**MASKED_PPO, **annealed(MASKED_LR)},
                     model="sb3_contrib:MaskablePPO", masked=True),
    # SB3's MultiInputPolicy (CombinedExtractor) on a Dict env, the zoo's CartPole-v1's
    "multi-input": Anchor(lambda a: ZOO_PPO_ENVS, by_id, zoo, policy="MultiInputPolicy"),
    # sb3-contrib's RecurrentPPO (MlpLstmPolicy), the zoo's CartPoleNoVel-v1 settings
    "recurrent": Anchor(lambda a: ZOO_PPO_ENVS, pararl_env, recurrent, normalize=True,
                        model="sb3_contrib:RecurrentPPO", policy="MlpLstmPolicy",
                        norm_gamma=ZOO_LSTM["gamma"]),
}  # fmt: skip
MODELS = {"dqn": "DQN", "ppo": "PPO", "sac": "SAC", "td3": "TD3"}


def model_class(algo: str, anchor: Anchor | None = None) -> Any:
    """SB3's model of `algo`, or the anchor's own (`Anchor.model`)."""
    module, _, name = (anchor.model if anchor and anchor.model else "").partition(":")
    return getattr(importlib.import_module(module or "stable_baselines3"), name or MODELS[algo])


def make_envs(anchor: Anchor, algo: str, env: str, seed: int) -> tuple[Any, Any]:
    """The training envs and the evaluation env of `anchor`."""
    import gymnasium as gym
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    import pararl.envs  # noqa: F401 - registers pararl's own ids (`pararl/...`)

    envs = make_vec_env(anchor.make(env, True), n_envs=anchor.n_envs(algo), seed=seed)
    evals = make_vec_env(anchor.make(env, False), n_envs=1, seed=seed + 10_000)
    if anchor.normalize:
        # VecNormalize normalises Box observations only; others (POPGym's cards, a
        # Discrete value) keep theirs, as pararl's --norm-obs leaves what is not a vector
        boxed = isinstance(envs.observation_space, gym.spaces.Box)
        envs = VecNormalize(envs, norm_obs=boxed, gamma=anchor.norm_gamma)
        evals = VecNormalize(evals, norm_obs=boxed, training=False, norm_reward=False)
    return envs, evals


def overrides(pairs: Sequence[str]) -> dict[str, Any]:
    """`--set KEY=JSON ...` as settings (`clip_range_vf=null`, `learning_starts=300`);
    `net=[16]` sets the policy's `net_arch`."""
    out = {key: json.loads(value) for key, _, value in (p.partition("=") for p in pairs)}
    if "net" in out:
        out["policy_kwargs"] = {"net_arch": out.pop("net")}
    return out


@functools.cache
def callbacks() -> SimpleNamespace:
    """SB3's callbacks `Stopper`, `Clock` and `timed(masked)`, made on first use (SB3's
    base classes are imported then)."""
    from stable_baselines3.common.callbacks import BaseCallback, EvalCallback

    class Stopper(BaseCallback):
        """Ends `learn` once `stopped` is set."""

        def __init__(self, stopped: threading.Event) -> None:
            super().__init__()
            self.stopped = stopped

        def _on_step(self) -> bool:
            return not self.stopped.is_set()

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

    def timed(masked: bool) -> type:
        """SB3's deterministic `EvalCallback` (`masked`: sb3-contrib's, on the env's masks)
        keeping each evaluation in `points`, stopping at the first reaching `target`."""
        base: Any = EvalCallback
        if masked:
            from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback

            base = MaskableEvalCallback

        class Timed(base):
            def __init__(self, env: Any, episodes: int, every: int, start: float,
                         points: list[dict[str, float]], target: float | None) -> None:  # fmt: skip
                super().__init__(env, n_eval_episodes=episodes, eval_freq=every,
                                 deterministic=True, verbose=0)  # fmt: skip
                self.start, self.points, self.target = start, points, target

            def _on_step(self) -> bool:
                go_on = bool(super()._on_step())
                if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                    wall = round(time.perf_counter() - self.start, 3)
                    mean = float(self.last_mean_reward)
                    self.points.append({"env_steps": self.num_timesteps, "wall_s": wall,
                                        "eval_return": mean})  # fmt: skip
                    go_on = go_on and (self.target is None or mean < self.target)
                return go_on

        return Timed

    return SimpleNamespace(Stopper=Stopper, Clock=Clock, timed=timed)


MODEL, REPLAY, CURVE = "model.zip", "replay.pkl", "state.json"
STOP = threading.Event()  # set by SIGTERM or Ctrl-C while `stop_signals` holds


def stop_signals() -> contextlib.AbstractContextManager[None]:
    """SIGTERM and Ctrl-C set `STOP` inside: a run asked to stop while it loads still
    stops at its first step, and saves."""
    from pararl.errors import handled

    return handled(dict.fromkeys((signal.SIGTERM, signal.SIGINT), lambda *_: STOP.set()))


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
    """Model (with its optimizer), replay memory, counters and curve, each written under
    a temporary name first: the curve, renamed last, marks a whole save."""
    state.mkdir(parents=True, exist_ok=True)
    model.save(state / f"tmp-{MODEL}")
    model.save_replay_buffer(state / f"tmp-{REPLAY}")
    data = {"env_steps": int(model.num_timesteps), "train_s": train_s, "pieces": pieces,
            "curve": points}  # fmt: skip
    (state / f"tmp-{CURVE}").write_text(json.dumps(data))
    for name in (MODEL, REPLAY, CURVE):
        os.replace(state / f"tmp-{name}", state / name)


def learn(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """`algo` as `--anchor` runs it on `--env`, for the budget or until an evaluation
    reaches `--target`; every deterministic evaluation with its wall time. With `--state
    DIR` it goes in pieces: SIGTERM or Ctrl-C stop it at the next env step and it saves
    itself in DIR (`save_state`), from where the next piece carries on (its envs start
    afresh) on the same clock and evaluation schedule."""
    import numpy as np
    import torch
    from stable_baselines3.common.callbacks import CallbackList

    start = time.perf_counter()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    anchor = ANCHORS[args.anchor]
    cls = model_class(algo, anchor)
    state = Path(args.state) if args.state else None
    saved = load_state(state)
    pieces = 0 if saved is None else int(saved["pieces"])
    seed = args.seed + 1_000 * pieces  # a resumed piece does not replay the first's episodes
    envs, eval_env = make_envs(anchor, algo, args.env, seed)
    hyper = {**anchor.settings(algo, envs, args.budget), **overrides(args.set)}
    if saved is not None and state is not None:
        kept = {"policy_kwargs": hyper.get("policy_kwargs", {})}  # its network class, made here
        model: Any = cls.load(state / MODEL, env=envs, device="cpu", custom_objects=kept)
        model.set_random_seed(seed)
        model.load_replay_buffer(state / REPLAY)
        if model.num_timesteps != saved["env_steps"]:
            raise SystemExit(f"sb3: {state} holds a model and a curve of different runs; "
                             "remove it to start over")  # fmt: skip
    else:
        model = cls(anchor.policy, envs, seed=seed, device="cpu", verbose=0, **hyper)
    points: list[dict[str, float]] = [] if saved is None else saved["curve"]
    clock = start - (0.0 if saved is None else float(saved["train_s"]))  # the run's own
    steps = [callbacks().Stopper(STOP)]
    if args.eval_every > 0:
        every = max(args.eval_every // envs.num_envs, 1)  # SB3 counts calls of n_envs steps
        evaluate = callbacks().timed(anchor.masked)(eval_env, args.eval_episodes, every, clock,
                                                    points, args.target)  # fmt: skip
        evaluate.n_calls = model.num_timesteps // envs.num_envs  # the schedule goes on
        steps.insert(0, evaluate)
    from_steps = int(model.num_timesteps)
    silent(model)
    print(f"sb3: learning from {from_steps:,} env steps to {args.budget:,}", file=sys.stderr)
    model.learn(total_timesteps=args.budget - from_steps, callback=CallbackList(steps),
                reset_num_timesteps=saved is None)  # fmt: skip
    train_s = round(time.perf_counter() - clock, 3)
    best = max((p["eval_return"] for p in points), default=None)
    solved = args.target is not None and best is not None and best >= args.target
    paused = not solved and model.num_timesteps < args.budget
    if state is not None and paused:
        save_state(model, state, points, train_s, pieces + 1)
    elif state is not None:  # the memory is no longer needed; the model and the curve stay
        (state / REPLAY).unlink(missing_ok=True)
    if args.save:
        model.save(args.save)
    episodes = [e["r"] for e in list(model.ep_info_buffer or [])[-20:]]
    updates = model._n_updates  # PPO: minibatch steps, as pararl counts them
    if algo == "ppo":
        updates = model.n_epochs * (model.num_timesteps // model.batch_size)
    return {
        "status": "solved" if solved else "paused" if paused else "step budget reached",
        "env_steps": int(model.num_timesteps),
        "from_steps": from_steps,
        "train_s": train_s,
        "updates": int(updates),
        "curve": points,
        "best_eval": best,
        "train_return": float(np.mean(episodes)) if episodes else None,
        "paused": paused,
        "threads": torch.get_num_threads(),
    }


def verify(algo: str, args: argparse.Namespace) -> dict[str, Any]:
    """Deterministic mean return of the model saved at `args.model` (the anchor's eval env)."""
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy

    anchor = ANCHORS[args.anchor]
    evaluate: Any = evaluate_policy
    if anchor.masked:  # sb3-contrib's, which acts on the env's masks
        from sb3_contrib.common.maskable.evaluation import evaluate_policy as masked

        evaluate = masked

    model = model_class(algo, anchor).load(args.model, device="cpu")
    _, env = make_envs(anchor, algo, args.env, args.seed)
    returns, _ = evaluate(
        model, env, n_eval_episodes=args.episodes, deterministic=True, return_episode_rewards=True
    )
    values = np.asarray(returns, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std()), "episodes": len(values)}


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
        hyper = {**ZOO_ATARI_PPO, **annealed(ZOO_ATARI_PPO_LR, ZOO_ATARI_PPO_CLIP)}
        model = PPO("CnnPolicy", envs, **common, **hyper)
    clock = callbacks().Clock(args.slice_s)
    silent(model).learn(total_timesteps=ZOO_ATARI_STEPS, callback=clock)
    return {"points": clock.points}


def prefix(algo: str) -> str:
    """The marker of an anchor's result line, e.g. `sb3-ppo: `."""
    return f"sb3-{algo}: "


def command(algo: str, part: str, *args: str, **flags: object) -> list[str]:
    """The process that runs `part` of the `algo` anchor: `args` as given, each flag
    `name=value` as `--name value` (a list: its values; None: left out)."""
    options: list[str] = []
    for key, value in flags.items():
        if value is not None:
            values = value if isinstance(value, (list, tuple)) else [value]
            options += ["--" + key.replace("_", "-"), *map(str, values)]
    return [sys.executable, "-m", "benchmarks.lib.sb3", algo, part, *args, *options]


def parse(stdout: str, algo: str) -> dict[str, Any] | None:
    """The JSON of the anchor's last `sb3-ALGO: {...}` line."""
    lines = [line for line in stdout.splitlines() if line.startswith(prefix(algo))]
    return json.loads(lines[-1][len(prefix(algo)) :]) if lines else None


@functools.cache
def minatar_cnn() -> type:
    """The MinAtar paper's network as SB3 features (made on first use, as `callbacks`)."""
    import gymnasium as gym
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    class MinAtarCNN(BaseFeaturesExtractor):
        """Young & Tian 2019: a 3x3 convolution of 16 filters, 128 hidden units, ReLUs; on
        MinAtar's channels-last boolean planes, moved first here (as pararl's `ImageInput`)."""

        def __init__(self, observation_space: gym.spaces.Box) -> None:
            super().__init__(observation_space, features_dim=128)
            height, width, channels = observation_space.shape
            self.net = nn.Sequential(
                nn.Conv2d(channels, 16, kernel_size=3, stride=1), nn.ReLU(), nn.Flatten(),
                nn.Linear(16 * (height - 2) * (width - 2), 128), nn.ReLU(),
            )  # fmt: skip

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.net(observations.float().permute(0, 3, 1, 2))

    return MinAtarCNN


def minatar_policy() -> dict[str, Any]:
    """A policy of the MinAtar network alone: its features go straight to the heads."""
    return {"features_extractor_class": minatar_cnn(), "net_arch": []}


def dqn_settings(cfg: Any, budget: int) -> dict[str, Any]:
    """SB3 DQN with a pararl DQN config's settings (`for_env`'s, every field set); SB3
    counts its target interval in env steps, and decays epsilon over a fraction of `budget`."""
    steps_per_update = round(1 / cfg.replay_ratio)
    optimizer: dict[str, Any] = {}
    if cfg.optimizer == "rmsprop":  # pararl's centred RMSProp
        import torch

        centred = {"alpha": 0.95, "eps": 0.01, "centered": True}
        optimizer = {"optimizer_class": torch.optim.RMSprop, "optimizer_kwargs": centred}
    return {"learning_rate": cfg.lr, "buffer_size": cfg.buffer_size,
            "learning_starts": cfg.learning_starts, "batch_size": cfg.batch_size,
            "gamma": cfg.gamma, "train_freq": steps_per_update, "gradient_steps": 1,
            "target_update_interval": cfg.target_update * steps_per_update,
            "exploration_initial_eps": cfg.eps_start, "exploration_final_eps": cfg.eps_end,
            "exploration_fraction": cfg.eps_decay_steps / budget,
            "max_grad_norm": cfg.max_grad_norm, "policy_kwargs": optimizer}  # fmt: skip


def ppo_settings(cfg: Any) -> dict[str, Any]:
    """SB3 PPO with a pararl PPO config's settings (`for_env`'s); SB3's value clipping
    takes the clipped error alone, pararl's (CleanRL's) the larger of the two."""
    return {"learning_rate": functools.partial(linear, cfg.lr) if cfg.anneal_lr else cfg.lr,
            "n_steps": cfg.num_steps, "batch_size": cfg.minibatch_size,
            "n_epochs": cfg.update_epochs, "gamma": cfg.gamma, "gae_lambda": cfg.gae_lambda,
            "clip_range": cfg.clip_coef, "clip_range_vf": cfg.clip_coef if cfg.clip_vloss else None,
            "ent_coef": cfg.ent_coef, "vf_coef": cfg.vf_coef,
            "max_grad_norm": cfg.max_grad_norm}  # fmt: skip


def minatar_dqn(budget: int) -> dict[str, Any]:
    """SB3 DQN with pararl's MinAtar DQN defaults (`DQNConfig.BY_KIND["minatar"]`)."""
    from pararl.config import DQNConfig

    cfg = DQNConfig().for_env("minatar").config
    if cfg.n_step != 1 or cfg.double_dqn:
        raise ValueError("SB3's DQN has neither n-step returns nor double-DQN targets")
    settings = dqn_settings(cfg, budget)
    settings["policy_kwargs"] |= minatar_policy()
    return settings


def minatar_ppo() -> dict[str, Any]:
    """SB3 PPO with pararl's MinAtar PPO defaults (`PPOConfig.BY_KIND["minatar"]`)."""
    from pararl.config import PPOConfig

    return ppo_settings(PPOConfig().for_env("minatar").config) | {"policy_kwargs": minatar_policy()}


PARTS: dict[str, tuple[str, dict[str, Any]]] = {  # command: help, its options' defaults
    "learn": ("train for the budget (or to --target), evaluating on the way", dict(
        anchor="zoo", env="CartPole-v1", seed=0, budget=100_000, eval_every=5_000,
        eval_episodes=10, target=None, save="", state="", threads=0, set=[])),
    "verify": ("deterministic mean return of a saved model", dict(
        anchor="zoo", env="CartPole-v1", episodes=20, seed=12_345)),
    "pong": ("training throughput on Pong (zoo settings)", dict(
        env="PongNoFrameskip-v4", seed=0, slice_s=60.0, learning_starts=1_000)),
}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    top = argparse.ArgumentParser(prog="python -m benchmarks.lib.sb3", description=__doc__)
    top.add_argument("algo", choices=tuple(MODELS))
    sub = top.add_subparsers(dest="command", required=True)
    for name, (text, defaults) in PARTS.items():
        part = sub.add_parser(name, help=text)
        if name == "verify":
            part.add_argument("model")
        for key, default in defaults.items():
            flag = "--" + key.replace("_", "-")
            if isinstance(default, list):
                part.add_argument(flag, nargs="*", default=default)
            else:
                part.add_argument(flag, type=float if default is None else type(default),
                                  default=default)  # fmt: skip
    args = top.parse_args(argv)
    problems = [
        (args.command != "pong" and args.anchor not in ANCHORS,
         f"--anchor: one of {', '.join(ANCHORS)}"),
        (args.command == "learn" and (args.budget < 1 or args.eval_every < 0),
         "--budget must be >= 1 and --eval-every >= 0"),
        (args.command == "learn" and args.state and args.algo == "ppo",
         "--state (a run in pieces) is for the off-policy algorithms"),
        (args.command == "pong" and args.algo not in ("dqn", "ppo"), "pong runs dqn or ppo"),
    ]  # fmt: skip
    for bad, message in problems:
        if bad:
            print(f"sb3: {message}", file=sys.stderr)
            return 2
    run = {"learn": learn, "verify": verify, "pong": pong}[args.command]
    with stop_signals() if args.command == "learn" else contextlib.nullcontext():
        result = run(args.algo, args)
    print(prefix(args.algo) + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
