"""PPO training: batched inference on a vector env's observations, GAE, minibatch
epochs; acting and learning each on the device measured to be faster for them.

Envs run in SAME_STEP autoreset mode, so every step is a real transition and a
truncated episode's true last observation (`final_obs`) is there to bootstrap from.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl.algos.ppo import PPOHyper, PPOLearner, compute_gae
from pararl.config import PPOConfig
from pararl.devices import choose_devices
from pararl.envs.make import env_factory
from pararl.errors import UsageError
from pararl.models import ActorCritic, num_params
from pararl.runners.ppo_mode import ModeChoice, choose_mode
from pararl.runners.session import TrainSession
from pararl.runners.setup import (
    open_session,
    prepare,
    seed_everything,
    set_learner_threads,
)
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

        self.make_model = functools.partial(
            ActorCritic, obs_dim, self.action_dim, self.discrete, cfg.hidden, cfg.shared_body
        )
        self.devices = choose_devices(
            self.make_model, obs_dim, num_envs, cfg.minibatch_size, cfg.act_device, cfg.learn_device
        )
        torch.manual_seed(cfg.seed)
        model = self.make_model()
        hyper = PPOHyper(
            clip_coef=cfg.clip_coef,
            clip_vloss=cfg.clip_vloss,
            ent_coef=cfg.ent_coef,
            vf_coef=cfg.vf_coef,
            max_grad_norm=cfg.max_grad_norm,
            norm_adv=cfg.norm_adv,
            manual_grad=cfg.manual_grad,
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
    workers = cfg.workers or physical_cores()
    if cfg.backend == "ray":
        from pararl.raybackend.ppo_runner import ray_ppo_actors

        if cfg.mode == "serial" or cfg.double_buffer:  # checked before Ray starts
            raise UsageError(
                "--backend ray runs Ray actors; drop --mode serial and --double-buffer"
            )
        workers = ray_ppo_actors(cfg.workers, cfg.ray_address)
        choice = ModeChoice("ray", None, f"{workers} Ray actors")
    else:
        requested = "sync" if cfg.double_buffer and cfg.mode == "auto" else cfg.mode
        env_fn = env_factory(cfg.env, cfg.wrapper)
        choice = choose_mode(requested, env_fn, workers * cfg.envs_per_worker, workers)
    mode = choice.mode
    num_envs = workers * cfg.envs_per_worker
    if cfg.double_buffer and (mode != "sync" or workers < 2):
        raise UsageError(
            "--double-buffer needs --mode sync and at least 2 workers "
            f"(got mode {mode}, {workers} worker(s))"
        )
    state = PPOState(cfg, p.observation_space, p.action_space, num_envs, p.resume_state)
    threads = set_learner_threads(
        num_params(state.learner.model), 0 if mode == "serial" else workers
    )
    resolved: dict[str, Any] = {
        "mode": mode,
        "mode_reason": choice.reason,
        "num_envs": num_envs,
        "devices": state.devices.as_dict(),
        "learner_threads": threads,
    }
    session = open_session(p, state.make_model, resolved, state.env_steps, state.wall_s)
    d = state.devices
    session.console.message(
        f"pararl: PPO on {cfg.env}, mode {mode} ({choice.reason}), {num_envs} envs, act on "
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
    if mode == "ray":
        from pararl.raybackend.ppo_runner import run_ppo_ray

        return run_ppo_ray(state, session, workers)
    fns = [env_factory(cfg.env, cfg.wrapper)] * num_envs
    envs: gym.vector.VectorEnv = (
        SerialVectorEnv(fns, autoreset_mode="SameStep")
        if mode == "serial"
        else ParallelVectorEnv(fns, workers, autoreset_mode="SameStep")
    )
    gather = collect_double if cfg.double_buffer else collect
    try:
        obs, _ = envs.reset(seed=cfg.seed + state.env_steps)

        def next_rollout() -> dict[str, np.ndarray]:
            nonlocal obs
            rollout, obs = gather(state, envs, obs, session.record_episodes)
            return rollout

        train_loop(state, session, next_rollout)
    finally:
        envs.close()


def train_loop(
    state: PPOState, session: TrainSession, next_rollout: Callable[[], dict[str, np.ndarray]]
) -> None:
    """Rollout (from local envs or Ray actors), update, copy weights to the acting
    copy, session bookkeeping; until done."""
    cfg = state.config
    while not session.done(state.env_steps):
        remaining = max(0.0, 1 - state.env_steps / cfg.total_steps)
        if cfg.anneal_lr:
            state.learner.set_lr_fraction(remaining)
        if cfg.anneal_clip:
            state.learner.set_clip_fraction(remaining)
        stats = state.learner.update(next_rollout(), state.rng)
        state.sync_actor()
        session.tick(
            state.env_steps,
            state.learner.updates,
            state.actor,
            lambda: state.state(session.wall_s),
            stats,
        )


class Rollout:
    """Rollout storage [T, B] for one update, filled step by step (per env group when
    double-buffered), finished into a flat batch with advantages and returns."""

    def __init__(self, state: PPOState, steps: int, n: int) -> None:
        self.state, self.device = state, state.devices.act
        act_shape = (steps, n) if state.discrete else (steps, n, state.action_dim)
        self.obs = np.zeros((steps, n, *state.obs_shape), np.float32)
        self.actions = np.zeros(act_shape, np.int64 if state.discrete else np.float32)
        self.logprobs = np.zeros((steps, n), np.float32)
        self.values = np.zeros((steps, n))
        self.rewards = np.zeros((steps, n))
        self.final_values = np.zeros((steps, n))
        self.terminated = np.zeros((steps, n), bool)
        self.truncated = np.zeros((steps, n), bool)

    @torch.no_grad()
    def act(self, t: int, ids: np.ndarray, obs: np.ndarray) -> np.ndarray:
        """Sample actions for envs `ids` at step `t` with the acting copy; store them."""
        action, logprob, value = self.state.actor.act(torch.as_tensor(obs, device=self.device))
        self.obs[t, ids], self.actions[t, ids] = obs, action.cpu().numpy()
        self.logprobs[t, ids], self.values[t, ids] = logprob.cpu().numpy(), value.cpu().numpy()
        return self.actions[t, ids]

    @torch.no_grad()
    def record(
        self,
        t: int,
        ids: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        final_obs: list[Any],
    ) -> None:
        """Store the step's outcome; `final_obs` holds the truncated envs' last
        observations, in order, to bootstrap from."""
        self.rewards[t, ids], self.terminated[t, ids] = rewards, terminated
        self.truncated[t, ids] = truncated
        if final_obs:
            final = torch.as_tensor(np.stack(final_obs), device=self.device)
            self.final_values[t, ids[truncated]] = self.state.actor.value(final).cpu().numpy()

    @torch.no_grad()
    def finish(self, last_obs: np.ndarray) -> dict[str, np.ndarray]:
        cfg = self.state.config
        last_values = self.state.actor.value(torch.as_tensor(last_obs, device=self.device))
        adv, ret = compute_gae(
            self.rewards,
            self.values,
            last_values.cpu().numpy(),
            self.terminated,
            self.truncated,
            self.final_values,
            cfg.gamma,
            cfg.gae_lambda,
        )
        batch = {
            "obs": self.obs,
            "actions": self.actions,
            "logprobs": self.logprobs,
            "values": self.values.astype(np.float32),
            "advantages": adv.astype(np.float32),
            "returns": ret.astype(np.float32),
        }
        steps, n = self.rewards.shape
        return {k: v.reshape(steps * n, *v.shape[2:]) for k, v in batch.items()}


def _truncated_final_obs(infos: dict[str, Any], truncated: np.ndarray) -> list[Any]:
    if not truncated.any():
        return []
    return list(infos["final_obs"][truncated])


EpisodeSink = Callable[[dict[str, Any]], None]  # takes the infos of finished episodes


def collect(
    state: PPOState, envs: gym.vector.VectorEnv, obs: np.ndarray, episodes: EpisodeSink
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One rollout of `num_steps` vector steps; returns the flattened batch for the
    update (advantages and returns included) and the observation to continue from."""
    steps, n = state.config.num_steps, envs.num_envs
    rollout, ids = Rollout(state, steps, n), np.arange(n)
    for t in range(steps):
        actions = rollout.act(t, ids, obs)
        obs, reward, terminated, truncated, infos = envs.step(actions)
        rollout.record(
            t, ids, reward, terminated, truncated, _truncated_final_obs(infos, truncated)
        )
        episodes(infos.get("final_info", {}))
        state.env_steps += n
    return rollout.finish(obs), obs


def collect_double(
    state: PPOState, envs: gym.vector.VectorEnv, obs: np.ndarray, episodes: EpisodeSink
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """`collect` with the workers split in two groups: while one group steps, this
    process computes the other's actions. Same rollout, different overlap."""
    if not isinstance(envs, ParallelVectorEnv):
        raise TypeError("double-buffered sampling needs a ParallelVectorEnv (worker processes)")
    steps, n = state.config.num_steps, envs.num_envs
    halves = envs.worker_groups(2)
    rollout = Rollout(state, steps, n)
    t, back = [0, 0], np.zeros(n, bool)
    pending_obs, pending = (
        obs.copy(),
        {k: np.zeros(n, d) for k, d in (("rew", float), ("term", bool), ("trunc", bool))},
    )
    finals: dict[int, Any] = {}
    for ids in halves:
        envs.send(rollout.act(0, ids, obs[ids]), ids)
    while min(t) < steps:
        o, r, term, trunc, infos, ids = envs.recv(min_envs=1)
        pending_obs[ids], pending["rew"][ids] = o, r
        pending["term"][ids], pending["trunc"][ids], back[ids] = term, trunc, True
        for p in np.flatnonzero(infos.get("_final_obs", np.zeros(0, bool))):
            finals[int(ids[p])] = infos["final_obs"][p]
        episodes(infos.get("final_info", {}))
        for h, group in enumerate(halves):
            if t[h] >= steps or not back[group].all():
                continue
            truncated = pending["trunc"][group]
            rollout.record(
                t[h],
                group,
                pending["rew"][group],
                pending["term"][group],
                truncated,
                [finals.pop(int(i)) for i in group[truncated]],
            )
            back[group] = False
            state.env_steps += len(group)
            t[h] += 1
            if t[h] < steps:
                envs.send(rollout.act(t[h], group, pending_obs[group]), group)
    return rollout.finish(pending_obs), pending_obs
