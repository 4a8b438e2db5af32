"""PPO: one training loop fed by any rollout source.

    while not done:
        anneal the learning rate (and clip range)
        rollout <- the sampler (acting copy of the policy, GAE done)
        env_steps += its transitions
        minibatch epochs on the learning device
        normalisation statistics += the rollout's; weights -> the acting copy
        log, evaluate, checkpoint (session.tick)

Sources: envs in this process (`serial`) or in `ParallelVectorEnv` workers (`sync`)
through `samplers.rollout.collect`, or Ray actors (`samplers.rollout.ray`); acting
and learning each on the device measured to be faster (`runners.ppo_state`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from pararl import seeding
from pararl.config import PPOConfig
from pararl.envs.make import env_factory
from pararl.envs.masks import batch_mask
from pararl.errors import UsageError
from pararl.mp.threads import AdaptiveThreads, held, ppo_threads, torch_threads
from pararl.mp.topology import physical_cores
from pararl.runners.ppo_mode import ModeChoice, choose_mode
from pararl.runners.ppo_state import PPOState, ThreadRule
from pararl.runners.session import TrainSession
from pararl.runners.setup import Plan, Prepared, encoder_note
from pararl.samplers.rollout.collect import EnvStream, collect
from pararl.vector import ParallelVectorEnv, SerialVectorEnv

RolloutSource = Callable[[], dict[str, Any]]  # the next rollout, flattened

# metrics.csv columns of a PPO run, beside the session's: the update's losses and
# how far it moved the policy (`algos.ppo`), the normalisation (`models.normalize`),
# the torch threads the update ran with (`AdaptiveThreads`)
METRICS = (
    "pg_loss",
    "v_loss",
    "entropy",
    "approx_kl",
    "clipfrac",
    "obs_std",
    "reward_scale",
    "update_threads",
)


def train_loop(state: PPOState, session: TrainSession, next_rollout: RolloutSource) -> None:
    """See the module docstring."""
    cfg = state.config
    # the update's threads: on several, it drops to one while something else uses the
    # cores (two runs side by side), at rollout boundaries; a given count holds
    governor = AdaptiveThreads(
        state.update_threads,
        session.console.message,
        hold=held(state.devices.learn.type, cfg.learner_threads),
        name="PPO's update",
        set_threads=_leave,
    )
    while not session.done(state.env_steps):
        remaining = max(0.0, 1 - state.env_steps / cfg.budget)
        if cfg.anneal_lr:
            state.learner.set_lr_fraction(remaining)
        if cfg.anneal_clip:
            state.learner.set_clip_fraction(remaining)
        rollout = next_rollout()
        state.env_steps += len(rollout["advantages"])
        discounted = rollout.pop("discounted")
        learner, threads = state.learner, governor.threads
        updates, elapsed = learner.updates, learner.steps.stopwatch()
        with torch_threads(threads):
            stats = learner.update(rollout, state.rng)
        governor.record(learner.updates - updates, elapsed())
        stats["update_threads"] = threads
        state.learner.model.update_norm(rollout["obs"], discounted)  # after: see normalize
        stats.update(state.learner.model.norm.stats())
        state.sync_actor()
        session.tick(
            state.env_steps,
            state.learner.updates,
            state.actor,
            lambda: state.state(session.wall_s),
            stats,
        )


def _leave(threads: int) -> None:
    """The governor's count is applied around each update (`torch_threads`), so that
    acting keeps its own."""


def run_local(
    state: PPOState, session: TrainSession, mode: str, workers: int, num_envs: int
) -> None:
    """The loop over envs stepped here (`serial`) or by worker processes (`sync`)."""
    cfg = state.config
    fns = [env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)] * num_envs
    masks = state.mask_info  # action masks travel in shared memory (`envs.masks`)
    envs: SerialVectorEnv | ParallelVectorEnv = (
        SerialVectorEnv(fns, autoreset_mode="SameStep", shared_infos=masks)
        if mode == "serial"
        else ParallelVectorEnv(
            fns, num_workers=workers, autoreset_mode="SameStep", shared_infos=masks
        )
    )
    try:
        seeds = seeding.env_seeds(cfg.seed, num_envs, "env", 0, 0, state.env_steps)
        obs, infos = envs.reset(seed=seeds)
        stream = EnvStream.start(
            obs, state.rollout_spec.gamma, state.actor.initial_state(num_envs), batch_mask(infos)
        )

        def next_rollout() -> dict[str, Any]:
            return collect(state.actor, state.rollout_spec, envs, stream, session.record_episodes)

        train_loop(state, session, next_rollout)
    finally:
        envs.close()


def run_ray(state: PPOState, session: TrainSession, num_actors: int, per_actor: int) -> None:
    """The loop with Ray actors collecting the rollouts, `per_actor` envs each."""
    from pararl.samplers.rollout.ray import RayPPOPool

    cfg = state.config
    pool = RayPPOPool(
        state.make_model,
        state.rollout_spec,
        dataclasses.replace(cfg, envs_per_worker=per_actor),
        num_actors,
        state.env_steps,
        session.console.message,
    )

    def gather() -> dict[str, Any]:
        learner = state.learner
        batch, episodes = pool.gather(learner.model, learner.updates)
        for infos in episodes:
            session.record_episodes(infos)
        return batch

    try:
        train_loop(state, session, gather)
    finally:
        pool.close()


@dataclass(frozen=True)
class Layout:
    """Where a run's envs step: the mode (serial, sync or ray) and why, and the
    workers (Ray: actors) with the envs each steps."""

    choice: ModeChoice
    workers: int
    per_worker: int

    @property
    def mode(self) -> str:
        return self.choice.mode

    @property
    def num_envs(self) -> int:
        return self.workers * self.per_worker


def choose(cfg: PPOConfig) -> Layout:
    """The mode, the number of workers or Ray actors, and the envs each steps
    (`PPOConfig.split_envs`: the envs stay 8 by default whatever the machine, on as
    many of its cores as split them evenly)."""
    if cfg.backend == "ray":
        from pararl.samplers.ray.cluster import ray_actors

        if cfg.mode == "serial":  # checked before Ray starts
            raise UsageError("--backend ray runs Ray actors; drop --mode serial")
        workers, per = cfg.split_envs(ray_actors(cfg.workers, cfg.ray_address, 0))
        return Layout(ModeChoice("ray", None, f"{workers} Ray actors"), workers, per)
    workers, per = cfg.split_envs(physical_cores())
    env_fn = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)
    return Layout(choose_mode(cfg.mode, env_fn, workers * per, workers), workers, per)


def check_minibatch(cfg: PPOConfig, num_envs: int) -> None:
    """A minibatch must fit in a rollout."""
    s = cfg.settings
    rollout = num_envs * s.num_steps
    if s.minibatch_size > rollout:
        raise UsageError(
            f"--minibatch-size {s.minibatch_size} is larger than a rollout "
            f"({rollout:,} = {num_envs} envs x {s.num_steps} steps); give at most "
            f"{rollout}, or more --num-envs or --num-steps"
        )


def thread_rule(cfg: PPOConfig, layout: Layout) -> ThreadRule:
    """The run's torch threads for a network of a given size (`ppo_threads`)."""
    return functools.partial(
        ppo_threads, mode=layout.mode, workers=layout.workers, given=cfg.learner_threads
    )


def banner(cfg: PPOConfig, layout: Layout, state: PPOState) -> str:
    """The start-up line: the mode and why, the envs, the devices and why, an uneven
    minibatch split, a step that is not run as written."""
    d, step_mode = state.devices, state.learner.step_mode
    return (
        f"pararl: PPO on {cfg.env}, mode {layout.mode} ({layout.choice.reason}), "
        f"{layout.num_envs} envs, act on {d.act}, learn on {d.learn} ({d.reason})"
        + _uneven_minibatches(state, layout.num_envs)
        + (f", step: {step_mode}" if step_mode != "eager" else "")
    )


def _uneven_minibatches(state: PPOState, num_envs: int) -> str:
    size, count = state.settings.minibatch_size, state.learner.hyper.num_minibatches
    rollout = num_envs * state.settings.num_steps
    if rollout % size == 0:
        return ""
    return (
        f", {count} minibatch{'es' if count > 1 else ''} of {rollout // count} (the rollout "
        f"of {rollout:,} is not a multiple of --minibatch-size {size})"
    )


def resolved(layout: Layout, state: PPOState) -> dict[str, Any]:
    """What the run resolved at start-up, for config.json."""
    return {
        "mode": layout.mode,
        "mode_reason": layout.choice.reason,
        "num_envs": layout.num_envs,
        "workers": layout.workers,
        "envs_per_worker": layout.per_worker,
        "devices": state.devices.as_dict(),
        "step_mode": state.learner.step_mode,
        "learner_threads": state.act_threads,
        "update_threads": state.update_threads,
    }


def plan(p: Prepared) -> Plan:
    """Lay the envs out, check the minibatch fits, build the state with its thread
    rule, and set acting's threads; the loop runs on that."""
    cfg: PPOConfig = p.config
    layout = choose(cfg)
    check_minibatch(cfg, layout.num_envs)
    state = PPOState(
        p.filled,
        p.observation_space,
        p.action_space,
        layout.num_envs,
        p.resume_state,
        thread_rule(cfg, layout),
        p.action_masks,
    )
    torch.set_num_threads(state.act_threads)  # an update sets its own around it

    def run(session: TrainSession) -> None:
        if layout.mode == "ray":
            run_ray(state, session, layout.workers, layout.per_worker)
        else:
            run_local(state, session, layout.mode, layout.workers, layout.num_envs)

    return Plan(
        banner=banner(cfg, layout, state),
        metrics=METRICS,
        resolved=resolved(layout, state),
        make_model=state.make_model,
        start=(state.env_steps, state.wall_s),
        run=run,
        steps=lambda: state.env_steps,
        checkpoint=lambda wall_s: state.state(wall_s),
        notes=encoder_note(state.learner.model),
    )


__all__ = ["METRICS", "plan", "train_loop"]
