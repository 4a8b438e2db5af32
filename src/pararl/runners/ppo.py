"""PPO training: batched inference on a vector env's observations, GAE, minibatch
epochs; acting and learning each on the device measured to be faster for them.

Envs run in SAME_STEP autoreset mode, so every step is a real transition and a
truncated episode's true last observation (`final_obs`) is there to bootstrap from.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl.algos.ppo import PPOHyper, PPOLearner, compute_gae
from pararl.config import PPOConfig
from pararl.devices import choose_devices
from pararl.envs.make import env_factory
from pararl.evaluate import Evaluator
from pararl.models import ActorCritic, num_params
from pararl.runners.session import TrainSession
from pararl.runners.setup import prepare, seed_everything, set_learner_threads
from pararl.vector import ParallelVectorEnv, SerialVectorEnv, physical_cores


def check_spaces(config: PPOConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    from pararl.errors import UsageError

    if not isinstance(action_space, (gym.spaces.Discrete, gym.spaces.Box)):
        raise UsageError(f"PPO here needs Discrete or Box actions; {config.env} has {action_space}")
    if not isinstance(observation_space, gym.spaces.Box):
        raise UsageError(
            f"PPO here needs a Box observation space; {config.env} has "
            f"{observation_space}. Wrap it (e.g. FlattenObservation)."
        )


class PPOState:
    """The model on both devices, the learner, and the run's counters."""

    def __init__(
        self,
        cfg: PPOConfig,
        obs_space: gym.Space,
        act_space: gym.Space,
        num_envs: int,
        resume_state: dict[str, Any] | None = None,
    ) -> None:
        self.config = cfg
        self.obs_shape = tuple(obs_space.shape or ())
        self.discrete = isinstance(act_space, gym.spaces.Discrete)
        if isinstance(act_space, gym.spaces.Discrete):
            self.action_dim = int(act_space.n)
        else:
            self.action_dim = int(np.prod(act_space.shape or (1,)))
        obs_dim = int(np.prod(self.obs_shape))

        def make() -> ActorCritic:
            return ActorCritic(obs_dim, self.action_dim, self.discrete, cfg.hidden, cfg.shared_body)

        self.devices = choose_devices(
            make, obs_dim, num_envs, cfg.minibatch_size, cfg.act_device, cfg.learn_device
        )
        torch.manual_seed(cfg.seed)
        model = make()
        hyper = PPOHyper(
            clip_coef=cfg.clip_coef,
            clip_vloss=cfg.clip_vloss,
            ent_coef=cfg.ent_coef,
            vf_coef=cfg.vf_coef,
            max_grad_norm=cfg.max_grad_norm,
            norm_adv=cfg.norm_adv,
            update_epochs=cfg.update_epochs,
            num_minibatches=max(1, num_envs * cfg.num_steps // cfg.minibatch_size),
        )
        self.learner = PPOLearner(model, hyper, cfg.lr, self.devices.learn)
        # the acting copy lives on the acting device; weights are copied once per update
        self.actor = (
            self.learner.model
            if self.devices.act == self.devices.learn
            else copy.deepcopy(self.learner.model).to(self.devices.act)
        )
        self.rng = np.random.default_rng(cfg.seed)
        self.env_steps, self.wall_s = 0, 0.0
        if resume_state is not None:
            self.learner.load_state_dict(resume_state["learner"])
            self.sync_actor()
            self.env_steps = int(resume_state["env_steps"])
            self.wall_s = float(resume_state.get("wall_s", 0.0))

    def sync_actor(self) -> None:
        if self.actor is not self.learner.model:
            self.actor.load_state_dict(self.learner.model.state_dict())

    def state(self, wall_s: float) -> dict[str, Any]:
        return {
            "format": 1,
            "algo": "ppo",
            "env_steps": self.env_steps,
            "wall_s": wall_s,
            "learner": self.learner.state_dict(),
            "obs_shape": self.obs_shape,
            "action_dim": self.action_dim,
            "discrete": self.discrete,
        }


def train_ppo(config: PPOConfig) -> TrainSession:
    """Train PPO as configured; returns the finished session."""
    p = prepare(config, "ppo", check_spaces)
    cfg: PPOConfig = p.config
    seed_everything(cfg.seed)
    mode = cfg.mode if cfg.mode != "auto" else ("sync" if physical_cores() > 1 else "serial")
    workers = cfg.workers or physical_cores()
    num_envs = workers * cfg.envs_per_worker
    state = PPOState(cfg, p.observation_space, p.action_space, num_envs, p.resume_state)
    threads = set_learner_threads(
        num_params(state.learner.model), 0 if mode == "serial" else workers
    )
    resolved = {
        "mode": mode,
        "num_envs": num_envs,
        "devices": state.devices.as_dict(),
        "learner_threads": threads,
        "target_return": p.spec_threshold,
    }
    session = TrainSession(
        cfg,
        p.run,
        Evaluator(env_factory(cfg.env), cfg.eval_episodes, cfg.seed + 10_000),
        p.spec_threshold,
        {"resolved": resolved},
        start_steps=state.env_steps,
        start_wall=state.wall_s,
    )
    d = state.devices
    session.console.message(
        f"pararl: PPO on {cfg.env}, mode {mode}, {num_envs} envs, act on "
        f"{d.act}, learn on {d.learn} ({d.reason}), run dir {p.run.root}"
    )
    status = "failed"
    try:
        run_ppo(state, session, mode, workers, num_envs)
        status = "solved" if session.solved else "step budget reached"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        session.finish(state.env_steps, lambda: state.state(session.wall_s), status)
        session.close()
    return session


def run_ppo(state: PPOState, session: TrainSession, mode: str, workers: int, num_envs: int) -> None:
    """Collect a rollout with the acting copy, compute GAE, update, copy weights back."""
    cfg = state.config
    fns = [env_factory(cfg.env, cfg.wrapper)] * num_envs
    envs: gym.vector.VectorEnv = (
        SerialVectorEnv(fns, autoreset_mode="SameStep")
        if mode == "serial"
        else ParallelVectorEnv(fns, workers, autoreset_mode="SameStep")
    )
    stats: dict[str, Any] = {}
    try:
        obs, _ = envs.reset(seed=cfg.seed + state.env_steps)
        while not session.done(state.env_steps):
            if cfg.anneal_lr:
                state.learner.set_lr_fraction(max(0.0, 1 - state.env_steps / cfg.total_steps))
            rollout, obs = collect(state, envs, obs, session)
            stats = state.learner.update(rollout, state.rng)
            state.sync_actor()
            session.tick(
                state.env_steps,
                state.learner.updates,
                state.actor.greedy,
                lambda: state.state(session.wall_s),
                stats,
            )
    finally:
        envs.close()


def collect(
    state: PPOState, envs: gym.vector.VectorEnv, obs: np.ndarray, session: TrainSession
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One rollout of `num_steps` vector steps; returns the flattened batch for the
    update (advantages and returns included) and the observation to continue from."""
    cfg, actor, device = state.config, state.actor, state.devices.act
    steps, n = cfg.num_steps, envs.num_envs
    buf = {
        "obs": np.zeros((steps, n, *state.obs_shape), np.float32),
        "actions": np.zeros(
            (steps, n) if state.discrete else (steps, n, state.action_dim),
            np.int64 if state.discrete else np.float32,
        ),
        "logprobs": np.zeros((steps, n), np.float32),
        "values": np.zeros((steps, n)),
        "rewards": np.zeros((steps, n)),
        "final_values": np.zeros((steps, n)),
    }
    term, trunc = np.zeros((steps, n), bool), np.zeros((steps, n), bool)
    for t in range(steps):
        with torch.no_grad():
            action, logprob, value = actor.act(torch.as_tensor(obs, device=device))
        buf["obs"][t], buf["actions"][t] = obs, action.cpu().numpy()
        buf["logprobs"][t], buf["values"][t] = logprob.cpu().numpy(), value.cpu().numpy()
        obs, buf["rewards"][t], term[t], trunc[t], infos = envs.step(buf["actions"][t])
        if trunc[t].any():  # value of each truncated episode's true last observation
            final = np.stack(list(infos["final_obs"][trunc[t]]))
            with torch.no_grad():
                buf["final_values"][t, trunc[t]] = (
                    actor.value(torch.as_tensor(final, device=device)).cpu().numpy()
                )
        session.record_episodes(infos.get("final_info", {}))
        state.env_steps += n
    with torch.no_grad():
        last_values = actor.value(torch.as_tensor(obs, device=device)).cpu().numpy()
    adv, ret = compute_gae(
        buf["rewards"],
        buf["values"],
        last_values,
        term,
        trunc,
        buf["final_values"],
        cfg.gamma,
        cfg.gae_lambda,
    )
    batch = {
        "obs": buf["obs"],
        "actions": buf["actions"],
        "logprobs": buf["logprobs"],
        "values": buf["values"].astype(np.float32),
        "advantages": adv.astype(np.float32),
        "returns": ret.astype(np.float32),
    }
    return {k: v.reshape(steps * n, *v.shape[2:]) for k, v in batch.items()}, obs
