"""MAML-TRPO meta-training on the multi-task sampler.

    while not done:
        tasks <- the task distribution (seeded by the iteration)
        for each inner step:
            "train" episodes <- sampler(tasks, each task's params so far)   (theta at first)
            theta'_i <- inner step from them (linear baseline fitted per task)
        "valid" episodes <- sampler(tasks, theta'_i on task i's envs)
        theta <- TRPO on the valid surrogate, through the inner step (algos.maml)
        log pre-/post-adaptation returns, KL, line-search steps, time split; session.tick

Acting runs on a CPU copy of the policy (`TaskPolicy`), the meta-update on the
learning device. Env steps are counted as episode slots (meta-batch x episodes
x episode length per batch), so every iteration advances the budget equally.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from pararl import seeding
from pararl.algos.baseline import TaskBatch, task_batch
from pararl.algos.maml import MAMLLearner, MetaBatch, make_model
from pararl.checkpoint import Header
from pararl.config import MAMLConfig
from pararl.devices import resolve_device
from pararl.errors import UsageError
from pararl.evaluation.reported import ReportedReturns
from pararl.models.gaussian import TaskPolicy
from pararl.mp.threads import AdaptiveThreads, held, maml_threads
from pararl.mp.topology import physical_cores
from pararl.runners.session import TrainSession
from pararl.runners.setup import Plan, Prepared
from pararl.samplers.meta.sampler import MultiTaskSampler, SampleResult
from pararl.weights.local import LocalCopy

# metrics.csv columns of a MAML run, beside the session's: the meta-iteration, the
# return before and after adaptation, the outer TRPO step (`algos.maml`), env steps
# stepped (episodes may end early), the iteration's time split and the torch threads
# its outer step ran with (`AdaptiveThreads`)
METRICS = (
    "iteration",
    "pre_return",
    "post_return",
    "kl",
    "ls_steps",
    "step_accepted",
    "surrogate_before",
    "surrogate_after",
    "sampled_steps",
    "time_sampling_s",
    "time_adaptation_s",
    "time_outer_s",
    "learner_threads",
)


class EpisodeSampler(Protocol):
    """What a meta-iteration needs of a sampler (`MultiTaskSampler`; the benchmark's
    re-implementation of another design answers the same)."""

    def sample_tasks(self, n: int, seed: int | None = None) -> list[Any]: ...

    def sample(
        self, tasks: list[Any], episodes_per_task: int, seed: int | None = None
    ) -> SampleResult: ...


class MAMLState:
    """The meta-policy (learning device), its CPU acting copy, and the counters."""

    def __init__(
        self,
        cfg: MAMLConfig,
        obs_dim: int,
        action_dim: int,
        resume: dict[str, Any] | None,
        action_bounds: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """`action_bounds`: the env's (low, high), kept in checkpoints so that a
        loaded agent's actions stay within them (the Gaussian's do not)."""
        self.config = cfg
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.action_bounds = action_bounds
        self.device = resolve_device(cfg.device)
        model = make_model(cfg, obs_dim, action_dim)  # from the seeded global torch stream
        self.learner = MAMLLearner(model, cfg, self.device)
        self.acting = TaskPolicy(model if self.device.type == "cpu" else copy.deepcopy(model).cpu())
        self.weights = LocalCopy(self.acting.model)
        self.iteration, self.env_steps, self.wall_s = 0, 0, 0.0
        if resume is not None:
            self.learner.load_state_dict(resume["learner"])
            self.iteration = int(resume["iteration"])
            header = Header.of(resume)
            self.env_steps, self.wall_s = header.env_steps, header.wall_s
        self.sync_acting()

    def sync_acting(self) -> None:
        self.weights.publish(self.learner.model, self.learner.updates)

    def state(self, wall_s: float) -> dict[str, Any]:
        return {
            **Header("maml", 1, self.env_steps, wall_s).as_dict(),
            "iteration": self.iteration,
            "learner": self.learner.state_dict(),
            "obs_shape": (self.obs_dim,),
            "action_dim": self.action_dim,
            "action_bounds": self.action_bounds,
        }


def sample_batch(
    state: MAMLState, sampler: EpisodeSampler, tasks: list[Any], seed: int
) -> tuple[TaskBatch, int]:
    """Episodes of every task with the acting policy's current parameters, as tensors
    on the learning device; and the env steps they took."""
    cfg = state.config
    result = sampler.sample(tasks, cfg.fast_batch_size, seed=seed)
    batch = task_batch(result.episodes, cfg.gamma, cfg.gae_lambda, state.device)
    return batch, result.stats.env_steps


def meta_iteration(
    state: MAMLState, sampler: EpisodeSampler
) -> tuple[dict[str, float], np.ndarray]:
    """One meta-iteration (see the module docstring): its statistics, and the
    post-adaptation return of every valid episode [tasks, episodes]."""
    cfg, it, learner = state.config, state.iteration, state.learner
    seconds = {"sampling": 0.0, "adaptation": 0.0, "outer": 0.0}
    tasks = sampler.sample_tasks(
        cfg.meta_batch_size or 1, seed=seeding.integer(cfg.seed, "task", it)
    )
    state.acting.set_task_params(None)  # the first batch acts with theta
    train: list[TaskBatch] = []
    sampled = 0
    for step in range(cfg.num_steps):
        t0 = time.perf_counter()
        batch, steps = sample_batch(
            state, sampler, tasks, seeding.integer(cfg.seed, "env", it, step)
        )
        t1 = time.perf_counter()
        train.append(batch)
        # each task's parameters after the inner steps so far act in its envs next
        state.acting.set_task_params(learner.adapted(train))
        seconds["sampling"] += t1 - t0
        seconds["adaptation"] += time.perf_counter() - t1
        sampled += steps
    t0 = time.perf_counter()
    valid, steps = sample_batch(
        state, sampler, tasks, seeding.integer(cfg.seed, "env", it, cfg.num_steps)
    )
    t1 = time.perf_counter()
    stats = learner.step(MetaBatch(train, valid))
    state.sync_acting()
    state.acting.set_task_params(None)
    seconds["sampling"] += t1 - t0
    seconds["outer"] = time.perf_counter() - t1
    state.iteration += 1
    row = {
        "iteration": float(state.iteration),
        "pre_return": float(train[0].returns.mean()),
        "post_return": float(valid.returns.mean()),
        **stats,
        "sampled_steps": float(sampled + steps),
        **{f"time_{k}_s": v for k, v in seconds.items()},
    }
    return row, valid.returns


def train_loop(
    state: MAMLState, session: TrainSession, sampler: MultiTaskSampler, reported: ReportedReturns
) -> None:
    """Meta-iterations until the budget is spent (or `--target-return` is reached)."""
    cfg, learner = state.config, state.learner
    per_iteration = cfg.steps_per_iteration()
    # the outer step's threads: on several, it drops to one while something else uses
    # the cores (two runs side by side), between meta-iterations; a given count holds
    governor = AdaptiveThreads(
        learner.threads or 1,
        session.console.message,
        hold=held(state.device.type, cfg.learner_threads),
        name="MAML's outer step",
        set_threads=lambda threads: setattr(learner, "threads", threads),
    )
    while not session.done(state.env_steps):
        threads = learner.threads or 1  # this iteration's, before the governor's say
        stats, post_returns = meta_iteration(state, sampler)
        stats["learner_threads"] = float(threads)
        governor.record(1, stats["time_outer_s"])
        state.env_steps += per_iteration
        reported.report(post_returns)
        session.tick(
            state.env_steps,
            state.learner.updates,
            state.learner.model,
            lambda: state.state(session.wall_s),
            stats,
        )


def layout(cfg: MAMLConfig, workers: int) -> int:
    """Envs per worker: as given, or every episode of every task at once (the most
    episodes side by side that spread evenly over the workers)."""
    tasks = cfg.meta_batch_size or 1
    if cfg.envs_per_worker is not None:
        return cfg.envs_per_worker
    for per_task in sorted(
        d for d in range(1, cfg.fast_batch_size + 1) if cfg.fast_batch_size % d == 0
    )[::-1]:
        if tasks * per_task % workers == 0:
            return tasks * per_task // workers
    raise UsageError(
        f"{tasks} tasks x {cfg.fast_batch_size} episodes cannot be spread evenly over "
        f"{workers} workers; pass --workers or --envs-per-worker so that workers x envs "
        "per worker is a multiple of --meta-batch-size"
    )


def plan(p: Prepared) -> Plan:
    cfg: MAMLConfig = p.config
    obs_dim = int(math.prod(p.observation_space.shape or (1,)))
    action_dim = int(math.prod(p.action_space.shape or (1,)))
    workers = cfg.workers or physical_cores()
    per_worker = layout(cfg, workers)
    space = p.action_space
    bounds = (space.low.ravel(), space.high.ravel()) if isinstance(space, gym.spaces.Box) else None
    state = MAMLState(cfg, obs_dim, action_dim, p.resume_state, bounds)
    acting, threads = maml_threads(cfg.learner_threads)
    torch.set_num_threads(acting)
    state.learner.threads = threads
    sampler = MultiTaskSampler(
        cfg.env,
        state.acting,
        num_workers=workers,
        envs_per_worker=per_worker,
        episode_length=cfg.episode_length,
        recv=cfg.recv,
        env_kwargs=cfg.env_kwargs,
    )
    try:
        sampler.assign(cfg.meta_batch_size or 1, cfg.fast_batch_size)  # checks the layout
    except BaseException:
        sampler.close()
        raise
    reported = ReportedReturns()
    num_envs = workers * per_worker
    return Plan(
        banner=f"pararl: MAML-TRPO on {cfg.env}, {cfg.meta_batch_size} tasks x "
        f"{cfg.fast_batch_size} episodes, {workers} workers x {per_worker} envs, "
        f"meta-update on {state.device}",
        metrics=METRICS,
        resolved={"num_envs": num_envs, "device": str(state.device), "learner_threads": threads},
        make_model=lambda: make_model(cfg, obs_dim, action_dim),
        start=(state.env_steps, state.wall_s),
        run=lambda session: train_loop(state, session, sampler, reported),
        steps=lambda: state.env_steps,
        checkpoint=lambda wall_s: state.state(wall_s),
        close=sampler.close,
        reported=reported,
    )


__all__ = ["METRICS", "EpisodeSampler", "MAMLState", "meta_iteration", "plan", "train_loop"]
