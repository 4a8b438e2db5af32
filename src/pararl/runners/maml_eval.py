"""`pararl evaluate RUN_DIR` for a MAML run: how much the meta-policy gains from
adaptation on tasks it has never seen.

New tasks come from the env's task distribution (seeded by `--seed`); each is
sampled with the meta-parameters, then after each of `--adapt-steps` inner steps
with the task's adapted parameters, every inner step taken from the episodes of
the policy before it (as in training). The return is reported at every stage;
`--video` records one episode of the first task's adapted policy (mean actions).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.func import functional_call

from pararl import checkpoint, seeding
from pararl.algos.baseline import TaskBatch, task_batch
from pararl.algos.maml import adapt, load_model, stack
from pararl.config import EvaluateConfig, MAMLConfig, saved_config
from pararl.config.saved import saved_facts
from pararl.envs.make import check_env_id
from pararl.errors import UsageError
from pararl.models.gaussian import GaussianMLP, Params, TaskPolicy
from pararl.mp.topology import physical_cores
from pararl.rundir import RunDir
from pararl.samplers.meta.sampler import MultiTaskSampler, make_task_env


@dataclass
class Adaptation:
    returns: np.ndarray  # mean return per task [steps + 1, tasks]: before, after each step
    tasks: list[Any]
    params: Params  # every task's parameters after the last step [tasks, ...]


def adaptation_returns(
    config: MAMLConfig,
    model: GaussianMLP,
    tasks: int | Sequence[Any],
    episodes: int,
    steps: int,
    seed: int,
    workers: int,
) -> Adaptation:
    """The return of tasks before adaptation, then after each step: `tasks` new ones
    drawn from the env's distribution, or the tasks given."""
    count = tasks if isinstance(tasks, int) else len(tasks)
    policy = TaskPolicy(model)
    fast = stack(model.params(), count)
    total = count * episodes  # one episode per env, spread over the workers that divide it
    workers = max(w for w in range(1, workers + 1) if total % w == 0)
    sampler = MultiTaskSampler(
        config.env,
        policy,
        num_workers=workers,
        envs_per_worker=total // workers,
        episode_length=config.episode_length,
        recv=config.recv,
        env_kwargs=config.env_kwargs,
    )
    returns: list[np.ndarray] = []
    train: list[TaskBatch] = []
    try:
        drawn = (
            sampler.sample_tasks(tasks, seed=seeding.integer(seed, "task", 0))
            if isinstance(tasks, int)
            else list(tasks)
        )
        for step in range(steps + 1):
            result = sampler.sample(drawn, episodes, seed=seeding.integer(seed, "eval", step))
            batch = task_batch(
                result.episodes, config.gamma, config.gae_lambda, torch.device("cpu")
            )
            returns.append(batch.returns.mean(axis=1))
            if step < steps:
                train.append(batch)
                fast = adapt(model, model.params(), train, config.fast_lr, first_order=True)
                policy.set_task_params(fast)
    finally:
        sampler.close()
    return Adaptation(np.stack(returns), drawn, {n: p.detach() for n, p in fast.items()})


def adapted_episode(
    config: MAMLConfig, model: GaussianMLP, params: Params, task: Any, seed: int
) -> tuple[list[np.ndarray], float, float]:
    """One episode of `task` with its adapted parameters (mean actions), rendered:
    the frames, the env's frame rate and the return."""
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")  # off-screen MuJoCo rendering
    env = make_task_env(
        config.env, config.episode_length, {**config.env_kwargs, "render_mode": "rgb_array"}
    )
    try:
        env.unwrapped.reset_task(task)  # type: ignore[attr-defined]
        obs, _ = env.reset(seed=seeding.integer(seed, "eval", 0, 1))
        frames: list[np.ndarray] = []
        total, done = 0.0, False
        while not done:
            frames.append(np.asarray(env.render()))
            with torch.no_grad():
                mean, _ = functional_call(
                    model, params, (torch.as_tensor(obs[None], dtype=torch.float32),)
                )
            obs, reward, terminated, truncated, _ = env.step(mean[0].numpy())
            total += float(reward)
            done = terminated or truncated
        return frames, float(env.metadata.get("render_fps") or 30), total
    finally:
        env.close()


def run(cfg: EvaluateConfig, write_video: Callable[..., None]) -> dict[str, float]:
    """Print and return the mean return before and after each adaptation step; with
    `--video`, record the first task's adapted policy (`write_video(frames, path, fps)`)."""
    if cfg.render:
        raise UsageError(
            "--render shows one policy; a MAML run's policy is adapted per task: use "
            "--video FILE.gif to record the first new task's adapted policy"
        )
    if cfg.tasks < 1 or cfg.adapt_steps < 0:
        raise UsageError("--tasks must be >= 1 and --adapt-steps >= 0")
    run_dir = RunDir(cfg.run_dir)
    config = saved_config(run_dir.root)
    if not isinstance(config, MAMLConfig):
        raise UsageError(f"{cfg.run_dir} is not a MAML run")
    found = saved_facts(run_dir.root).get("env_module_dir")
    check_env_id(
        config.env, [found] if found else [], named_by=run_dir.root, trusted=cfg.trust_checkpoint
    )
    if cfg.video is not None:
        probe = make_task_env(config.env, config.episode_length, config.env_kwargs)
        modes = probe.metadata.get("render_modes") or []
        probe.close()
        if "rgb_array" not in modes:
            raise UsageError(f"{config.env} cannot render frames; --video needs an env that can")
    model = load_model(
        config, checkpoint.load(run_dir.checkpoint(cfg.checkpoint), cfg.trust_checkpoint, "maml")
    )
    out = adaptation_returns(
        config, model, cfg.tasks, cfg.episodes, cfg.adapt_steps, cfg.seed, physical_cores()
    )
    result: dict[str, float] = {}
    for step, per_task in enumerate(out.returns):
        label = "before adaptation" if step == 0 else f"after {step} step{'s' * (step > 1)}"
        print(
            f"{config.env}: {label}: mean return {per_task.mean():.1f} ± {per_task.std():.1f} "
            f"over {cfg.tasks} new tasks x {cfg.episodes} episodes "
            f"({cfg.checkpoint} checkpoint of {cfg.run_dir})"
        )
        result[f"step_{step}"] = float(per_task.mean())
    if cfg.video is not None:
        first = {n: p[0] for n, p in out.params.items()}
        frames, fps, total = adapted_episode(config, model, first, out.tasks[0], cfg.seed)
        write_video(frames, cfg.video, fps)
        print(
            f"video of task {out.tasks[0]} after {cfg.adapt_steps} steps (return {total:.1f}) "
            f"written to {cfg.video}"
        )
    return result


__all__ = ["adaptation_returns", "run"]
