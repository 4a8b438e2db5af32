"""The MAML run configuration (`pararl train maml`). Each field's docstring is its
`--help` text; its defaults depend on the task family (by env id), not on the kind
of env."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Literal

import tyro

from pararl.config.kinds import EnvKind
from pararl.config.run import Filled, RunConfig, raise_first


@dataclass
class MAMLConfig(RunConfig):
    """MAML meta-training with a TRPO outer step on the multi-task sampler (Finn et al.
    2017; defaults: pytorch-maml-rl's configs/maml/*.yaml)."""

    env: str = "pararl/HalfCheetahDir-v0"
    """Meta-RL task env (sample_tasks / reset_task): pararl/HalfCheetahDir-v0,
    pararl/HalfCheetahVel-v0 or pararl/Navigation2D-v0."""
    BUDGET_OPTIONS: ClassVar[tuple[str, ...]] = ("meta_iterations",)

    meta_iterations: int = 500
    """Meta-iterations to run; the env-step budget is this times the steps of one
    (meta-batch x episodes per task x episode length x (inner steps + 1)) unless
    --total-steps is given."""
    meta_batch_size: int | None = None
    """Tasks per meta-iteration. Default: 20 for Navigation2D, 40 otherwise."""
    fast_batch_size: int = 20
    """Episodes per task for each inner step and for the post-adaptation ("valid") batch."""
    episode_length: int = 100
    """Steps per episode (the env's time limit is set to it)."""
    num_steps: int = 1
    """Inner gradient steps per task, each on new episodes of the task's adapted policy."""
    fast_lr: float = 0.1
    """Inner-step learning rate (alpha)."""
    first_order: bool = False
    """First-order MAML: the outer gradient ignores the inner step's second derivatives."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the tanh Gaussian policy."""
    init_std: float = 1.0
    """Initial standard deviation of the Gaussian policy."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 1.0
    """GAE lambda of the advantages (1.0: discounted return minus the linear baseline)."""
    max_kl: float = 0.01
    """TRPO: bound on the mean KL between the adapted policies before and after the step."""
    cg_iters: int = 10
    """TRPO: conjugate-gradient iterations."""
    cg_damping: float = 1e-5
    """TRPO: damping added to the Fisher-vector products."""
    ls_max_steps: int = 15
    """TRPO: line-search steps before the update is given up (theta kept)."""
    ls_backtrack_ratio: float = 0.8
    """TRPO: step shrink factor per line-search step."""
    recv: str = "auto"
    """Sampler recv policy: all, timeout=T, min_envs=K, or auto (measured per sample)."""
    envs_per_worker: int | None = None  # type: ignore[assignment]
    """Envs each worker steps. Default: every episode of every task at once
    (meta-batch x episodes per task envs in all), when they spread evenly."""
    eval_every: int = 1
    """Record the post-adaptation return as the run's evaluation (best checkpoint,
    --target-return) every this many env steps (default: every meta-iteration)."""
    # the run options MAML has no use for, kept off its --help: its evaluation is the
    # post-adaptation return training measures (no evaluation episodes or process),
    # it trains on the task's own reward, samples with local workers, and its outer
    # TRPO step is not a single gradient step to compile
    eval_in: Annotated[Literal["auto", "process", "inline"], tyro.conf.Suppress] = "inline"
    eval_episodes: Annotated[int, tyro.conf.Suppress] = 20
    eval_max_steps: Annotated[int | None, tyro.conf.Suppress] = None
    eval_actions: Annotated[Literal["greedy", "sampled"], tyro.conf.Suppress] = "greedy"
    wrapper: Annotated[Literal["none", "cartpole-shaped"], tyro.conf.Suppress] = "none"
    backend: Annotated[Literal["local", "ray"], tyro.conf.Suppress] = "local"
    ray_address: Annotated[str | None, tyro.conf.Suppress] = None
    ray_timeout_s: Annotated[float, tyro.conf.Suppress] = 300.0
    compile: Annotated[Literal["auto", "on", "off"], tyro.conf.Suppress] = "auto"

    def steps_per_iteration(self) -> int:
        """Env steps of one meta-iteration (episode slots: every inner step's and the
        post-adaptation batch); needs the meta-batch size filled in (`for_env`)."""
        tasks = self.meta_batch_size or 0
        return tasks * self.fast_batch_size * self.episode_length * (self.num_steps + 1)

    def for_env(self, kind: EnvKind, env_id: str | None = None) -> Filled[MAMLConfig]:
        # the defaults depend on the task family, by env id, not on `kind`
        filled: dict[str, Any] = {}
        if self.meta_batch_size is None:
            filled["meta_batch_size"] = 20 if "Navigation2D" in (env_id or self.env_name) else 40
        if self.checkpoint_every is None:
            filled["checkpoint_every"] = 25_000
        cfg = replace(self, **filled)
        if cfg.total_steps is None:
            filled["total_steps"] = cfg.meta_iterations * cfg.steps_per_iteration()
        return Filled(replace(cfg, **filled), kind, filled)

    def validate(self) -> None:
        super().validate()
        checks = [
            (self.meta_iterations >= 1, "--meta-iterations must be >= 1"),
            (
                self.meta_batch_size is None or self.meta_batch_size >= 1,
                "--meta-batch-size must be >= 1",
            ),
            (self.fast_batch_size >= 1, "--fast-batch-size must be >= 1"),
            (self.episode_length >= 1, "--episode-length must be >= 1"),
            (self.num_steps >= 1, "--num-steps must be >= 1"),
            (self.fast_lr > 0, "--fast-lr must be > 0"),
            (self.init_std > 0, "--init-std must be > 0"),
            (0 < self.gamma <= 1, "--gamma must be in (0, 1]"),
            (0 <= self.gae_lambda <= 1, "--gae-lambda must be in [0, 1]"),
            (self.max_kl > 0, "--max-kl must be > 0"),
            (self.cg_iters >= 1, "--cg-iters must be >= 1"),
            (self.cg_damping >= 0, "--cg-damping must be >= 0"),
            (self.ls_max_steps >= 1, "--ls-max-steps must be >= 1"),
            (0 < self.ls_backtrack_ratio < 1, "--ls-backtrack-ratio must be in (0, 1)"),
            (all(h >= 1 for h in self.hidden), "--hidden widths must be >= 1"),
            (self.backend == "local", "MAML samples with local worker processes: drop --backend"),
            (self.wrapper == "none", "MAML trains on the task's own reward: drop --wrapper"),
            (
                isinstance(self.env, str),
                f"MAML builds its task envs by id (a time limit of --episode-length each): "
                f"register the env that {self.env} makes (gymnasium.register) and pass its id",
            ),
        ]
        raise_first(checks)


__all__ = ["MAMLConfig"]
