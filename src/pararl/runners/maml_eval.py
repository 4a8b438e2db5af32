"""`pararl evaluate RUN_DIR` for a MAML run: how much the meta-policy gains from
adaptation on tasks it has never seen.

New tasks come from the env's task distribution (seeded by `--seed`); each is
sampled with the meta-parameters, then after each of `--adapt-steps` inner steps
with the task's adapted parameters, every inner step taken from the episodes of
the policy before it (as in training). The return is reported at every stage.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pararl import checkpoint, seeding
from pararl.algos.baseline import TaskBatch, task_batch
from pararl.algos.maml import adapt, load_model
from pararl.config import MAMLConfig
from pararl.errors import UsageError
from pararl.mp.topology import physical_cores
from pararl.playback_config import EvaluateConfig
from pararl.registry import config_from_json
from pararl.rundir import RunDir
from pararl.samplers.multitask import MultiTaskSampler
from pararl.samplers.task_policy import TaskPolicy


def adaptation_returns(
    config: MAMLConfig,
    state: dict[str, Any],
    tasks: int,
    episodes: int,
    steps: int,
    seed: int,
    workers: int,
) -> np.ndarray:
    """Mean return per task [steps + 1, tasks]: before adaptation, then after each step."""
    model = load_model(config, state)
    policy = TaskPolicy(model)
    total = tasks * episodes  # one episode per env, spread over the workers that divide it
    workers = max(w for w in range(1, workers + 1) if total % w == 0)
    sampler = MultiTaskSampler(
        config.env,
        policy,
        num_workers=workers,
        envs_per_worker=total // workers,
        episode_length=config.episode_length,
        recv=config.recv,
    )
    returns: list[np.ndarray] = []
    train: list[TaskBatch] = []
    try:
        drawn = sampler.sample_tasks(tasks, seed=seeding.integer(seed, "task", 0))
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
    return np.stack(returns)


def run(cfg: EvaluateConfig) -> dict[str, float]:
    """Print and return the mean return before and after each adaptation step."""
    if cfg.render or cfg.video is not None:
        raise UsageError(
            "--render and --video show a single policy; a MAML run's policy is adapted per "
            "task: run without them to see the returns before and after adaptation"
        )
    if cfg.tasks < 1 or cfg.adapt_steps < 0:
        raise UsageError("--tasks must be >= 1 and --adapt-steps >= 0")
    run_dir = RunDir(cfg.run_dir)
    config = config_from_json(run_dir.config.read_text())
    if not isinstance(config, MAMLConfig):
        raise UsageError(f"{cfg.run_dir} is not a MAML run")
    state = checkpoint.load(run_dir.checkpoint(cfg.checkpoint))
    returns = adaptation_returns(
        config, state, cfg.tasks, cfg.episodes, cfg.adapt_steps, cfg.seed, physical_cores()
    )
    result: dict[str, float] = {}
    for step, per_task in enumerate(returns):
        label = "before adaptation" if step == 0 else f"after {step} step{'s' * (step > 1)}"
        print(
            f"{config.env}: {label}: mean return {per_task.mean():.1f} ± {per_task.std():.1f} "
            f"over {cfg.tasks} new tasks x {cfg.episodes} episodes "
            f"({cfg.checkpoint} checkpoint of {cfg.run_dir})"
        )
        result[f"step_{step}"] = float(per_task.mean())
    return result


__all__ = ["adaptation_returns", "run"]
