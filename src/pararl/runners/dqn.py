"""DQN training: serial and sync loops, and the entry point that picks a mode.

serial: envs stepped in this process; sync: `ParallelVectorEnv` workers step them.
Both alternate acting and learning; `dqn_async` overlaps them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl.algos.dqn import DQNLearner
from pararl.config import DQNConfig, from_json
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.models import QNetwork, num_params
from pararl.replay import NStepBuilder, ReplayBuffer
from pararl.rundir import RunDir
from pararl.runners.session import TrainSession
from pararl.runners.setup import (
    open_session,
    prepare,
    resolve_device,
    seed_everything,
    set_learner_threads,
)
from pararl.samplers.dqn_actor import epsilon_greedy
from pararl.vector import ParallelVectorEnv, SerialVectorEnv, physical_cores


def resolve_mode(config: DQNConfig) -> str:
    if config.backend == "ray" and config.mode not in ("auto", "async"):
        raise UsageError(f"--backend ray runs async actors; drop --mode {config.mode}")
    if config.backend == "ray":
        return "async"
    if config.mode != "auto":
        return config.mode
    return "async" if physical_cores() > 1 else "serial"


def check_spaces(config: DQNConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    if not isinstance(action_space, gym.spaces.Discrete):
        raise UsageError(
            f"DQN needs a discrete action space; {config.env} has "
            f"{action_space}. Use an env with Discrete actions."
        )
    if not isinstance(observation_space, gym.spaces.Box):
        raise UsageError(
            f"DQN here needs a Box observation space; {config.env} has "
            f"{observation_space}. Wrap it (e.g. FlattenObservation)."
        )


class DQNState:
    """What a DQN run is made of, and how it is checkpointed."""

    def __init__(
        self,
        cfg: DQNConfig,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: torch.device,
        resume_state: dict[str, Any] | None = None,
    ) -> None:
        check_spaces(cfg, observation_space, action_space)
        assert isinstance(action_space, gym.spaces.Discrete)
        assert observation_space.shape is not None
        self.config = cfg
        self.obs_shape = tuple(observation_space.shape)
        self.num_actions = int(action_space.n)
        self.make_model = functools.partial(
            QNetwork, int(np.prod(self.obs_shape)), self.num_actions, cfg.hidden
        )
        q = self.make_model()
        self.learner = DQNLearner(q, cfg, device)
        self.replay = ReplayBuffer(cfg.buffer_size, self.obs_shape)
        self.rng = np.random.default_rng(cfg.seed)
        self.env_steps = 0
        self.wall_s = 0.0
        # the ratio counts env steps after learning_starts: (steps, updates) at zero debt
        self._ratio_origin = (cfg.learning_starts, 0)
        if resume_state is not None:
            self.load(resume_state)

    def updates_due(self) -> int:
        """Gradient updates the replay ratio allows now, beyond those done."""
        cfg = self.config
        if not self.can_learn():
            return 0
        if cfg.replay_ratio == 0:  # async without a ratio: learn all the time
            return 1
        origin_steps, origin_updates = self._ratio_origin
        allowed = int(cfg.replay_ratio * (self.env_steps - origin_steps))
        return max(0, allowed - (self.learner.updates - origin_updates))

    def can_learn(self) -> bool:
        cfg = self.config
        return len(self.replay) >= max(cfg.batch_size, cfg.learning_starts)

    def restart_ratio(self) -> None:
        """Count the replay ratio from now on (forget any debt either way)."""
        self._ratio_origin = (self.env_steps, self.learner.updates)

    def state(self, with_replay: bool = True, wall_s: float = 0.0) -> dict[str, Any]:
        return {
            "format": 1,
            "algo": "dqn",
            "env_steps": self.env_steps,
            "wall_s": wall_s,
            "learner": self.learner.state_dict(),
            "replay": self.replay.state_dict() if with_replay else None,
            "obs_shape": self.obs_shape,
            "num_actions": self.num_actions,
        }

    def load(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        if state.get("replay") is not None:
            self.replay.load_state_dict(state["replay"])
        self.env_steps = int(state["env_steps"])
        self.wall_s = float(state.get("wall_s", 0.0))


def uses_averaging(config: DQNConfig) -> bool:
    """`--mode averaging`, or `--resume` of a run that used it."""
    if config.mode == "averaging" or config.resume is None:
        return config.mode == "averaging"
    saved = RunDir(Path(config.resume)).config
    return saved.is_file() and getattr(from_json(saved.read_text()), "mode", "") == "averaging"


def train_dqn(config: DQNConfig) -> TrainSession | None:
    """Train DQN as configured; returns the finished session (run dir, results), or
    None on a torchrun rank other than 0 of `--mode averaging` (it owns no run)."""
    if uses_averaging(config):
        from pararl.runners.dqn_averaging import train_averaging

        return train_averaging(config)
    p = prepare(config, "dqn", check_spaces)
    cfg: DQNConfig = p.config
    seed_everything(cfg.seed)
    device = resolve_device(cfg.device)
    mode = resolve_mode(cfg)
    state = DQNState(cfg, p.observation_space, p.action_space, device, p.resume_state)
    busy = 0 if mode == "serial" else (cfg.workers or physical_cores())
    threads = set_learner_threads(num_params(state.learner.q), busy)
    resolved = {"mode": mode, "device": str(device), "learner_threads": threads}
    session = open_session(p, state.make_model, resolved, state.env_steps, state.wall_s)
    session.console.message(
        f"pararl: DQN on {cfg.env}, mode {mode}, learner on {device}, run dir {p.run.root}"
    )
    if mode == "async":
        from pararl.runners.dqn_async import run_async

        run = run_async
    else:
        run = run_serial_or_sync
    status = "failed"
    try:
        run(state, session, mode)
        status = "solved" if session.solved else "step budget reached"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        session.finish(state.env_steps, lambda: state.state(True, session.wall_s), status)
        session.close()
    return session


def act_and_learn(
    state: DQNState,
    envs: gym.vector.VectorEnv,
    nstep: NStepBuilder,
    actor_q: QNetwork,
    obs: np.ndarray,
    stats: dict[str, Any],
) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    """One vector step with epsilon-greedy actions, its n-step transitions stored,
    then the gradient updates the replay ratio allows. Returns the next observations,
    the step's infos and the latest update's stats (`stats` if none was due)."""
    cfg, learner, replay = state.config, state.learner, state.replay
    eps = cfg.epsilon(state.env_steps)
    actions = epsilon_greedy(actor_q, obs, eps, state.rng)
    next_obs, reward, terminated, truncated, infos = envs.step(actions)
    replay.add(nstep.add(obs, actions, reward, next_obs, terminated, truncated))
    state.env_steps += envs.num_envs
    for _ in range(state.updates_due()):
        stats = learner.update(replay.sample(cfg.batch_size, state.rng))
    return next_obs, infos, {**stats, "epsilon": eps}


def run_serial_or_sync(state: DQNState, session: TrainSession, mode: str) -> None:
    """Act with epsilon-greedy on a batch of envs; learn as the replay ratio allows."""
    cfg, learner = state.config, state.learner
    if cfg.replay_ratio == 0:
        raise UsageError(f"--replay-ratio 0 (learn without a ratio) needs --mode async, not {mode}")
    workers = cfg.workers or physical_cores()
    env_fns = [env_factory(cfg.env, cfg.wrapper)] * (workers * cfg.envs_per_worker)
    envs: gym.vector.VectorEnv = (
        SerialVectorEnv(env_fns) if mode == "serial" else ParallelVectorEnv(env_fns, workers)
    )
    actor_q = (
        learner.q
        if learner.device.type == "cpu"
        else QNetwork(learner.q.obs_dim, learner.q.num_actions, learner.q.hidden)
    )
    nstep = NStepBuilder(envs.num_envs, state.obs_shape, cfg.n_step, cfg.gamma)
    stats: dict[str, Any] = {}
    try:
        obs, _ = envs.reset(seed=cfg.seed + state.env_steps)
        while not session.done(state.env_steps):
            if actor_q is not learner.q and learner.updates % cfg.sync_every == 0:
                actor_q.load_state_dict(learner.q.state_dict())
            obs, infos, stats = act_and_learn(state, envs, nstep, actor_q, obs, stats)
            session.record_episodes(infos)
            session.tick(
                state.env_steps,
                learner.updates,
                learner.q,
                lambda: state.state(False, session.wall_s),
                stats,
            )
    finally:
        envs.close()
