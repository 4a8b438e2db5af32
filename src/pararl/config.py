"""Typed run configurations. Each field's docstring is its `--help` text.

A config is saved as `config.json` in the run directory and read back for resume
and evaluation. Values derived from others are properties, never fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pararl.errors import UsageError
from pararl.kinds import (
    KIND_TEXT,
    DQNSettings,
    EnvKind,
    ModelChoice,
    PPOSettings,
    env_kind,
    settings_of,
)
from pararl.run_config import RunConfig, to_json

_DQN_VECTORS: dict[str, Any] = dict(
    total_steps=100_000, lr=2.5e-3, gamma=0.99, buffer_size=100_000, batch_size=64,
    learning_starts=1_000, replay_ratio=0.25, n_step=3, double_dqn=True, target_update=250,
    eps_end=0.05, eps_decay_steps=10_000, model="mlp", optimizer="adam", eval_every=2_500,
)  # fmt: skip


@dataclass
class DQNConfig(RunConfig):
    """DQN (double DQN, Huber loss, n-step returns, target network)."""

    mode: Literal["auto", "serial", "sync", "async", "averaging"] = "auto"
    """`serial`: one process; `sync`: env workers + learning in between steps; `async`:
    actor processes act while the learner learns (default with more than one core);
    `averaging`: `--workers` replicas each learn on their own envs and replay memory,
    and average their parameters every `--average-every` updates (torch.distributed;
    also under `torchrun`)."""
    model: ModelChoice = "auto"
    """Q-network: `mlp` on flattened observations, `nature-cnn` (Mnih et al. 2015) or
    `minatar-cnn` (Young & Tian 2019) on images; `auto`: by the observations (images of
    36 pixels a side or more get the Nature CNN, smaller ones the MinAtar CNN)."""
    hidden: tuple[int, ...] = (128, 128)
    """Hidden layer widths of the Q-network MLP."""
    dueling: bool = False
    """Dueling head: Q = V + A - mean(A) (Wang et al. 2016)."""
    optimizer: Literal["adam", "rmsprop"] | None = None
    """`adam`, or `rmsprop`: centred RMSProp with decay 0.95 and eps 0.01 (the Nature
    DQN's and MinAtar's). Default: by env kind."""
    lr: float | None = None
    """Learning rate. Default: by env kind."""
    gamma: float | None = None
    """Discount factor. Default: by env kind."""
    buffer_size: int | None = None
    """Replay memory capacity (transitions). Default: by env kind."""
    batch_size: int | None = None
    """Minibatch size of each gradient update. Default: by env kind."""
    learning_starts: int | None = None
    """Env steps collected before the first update. Default: by env kind."""
    replay_ratio: float | None = None
    """Gradient updates per env step, kept in every mode. 0 (async only): no ratio,
    the learner learns all the time and actors act as fast as they can. Default: by
    env kind."""
    n_step: int | None = None
    """Steps in the n-step return. Default: by env kind."""
    double_dqn: bool | None = None
    """Use double DQN targets (online net picks, target net evaluates). Default: by
    env kind."""
    target_update: int | None = None
    """Hard target-network update every this many gradient updates (if tau == 1).
    Default: by env kind."""
    tau: float = 1.0
    """Polyak factor per update; 1.0 means hard updates every `target_update`."""
    max_grad_norm: float = 10.0
    """Gradient-norm clipping threshold."""
    eps_start: float = 1.0
    """Initial exploration epsilon."""
    eps_end: float | None = None
    """Final exploration epsilon. Default: by env kind."""
    eps_decay_steps: int | None = None
    """Env steps over which epsilon decays linearly from eps_start to eps_end. Default:
    by env kind."""
    apex_eps: bool = False
    """Async: per-actor epsilons eps_i = 0.4 ** (1 + 7 i / (N - 1)) (Ape-X) instead of
    the global schedule."""
    prioritized: bool = False
    """Prioritized replay (proportional; Schaul et al. 2016): batches drawn in proportion
    to |TD error|^alpha, losses weighted by importance weights, beta annealed to 1.
    Async and Ray: Ape-X (Horgan et al. 2018), actors give their transitions' first
    priorities and act with their own epsilons (as --apex-eps)."""
    priority_alpha: float = 0.6
    """Prioritized replay: priority exponent alpha (0: uniform)."""
    priority_beta: float = 0.4
    """Prioritized replay: importance-sampling exponent at the start, annealed to 1."""
    sync_every: int = 16
    """Async: actors load new weights every this many of their vector steps."""
    restart_actors: bool = False
    """Async: replace an actor that crashes or dies, keeping the replay data stored."""
    average_every: int = 64
    """Averaging: gradient updates of each replica between two parameter averages
    (rounded to whole steps of its envs)."""
    optimizer_sync: Literal["average", "local"] = "average"
    """Averaging: `average` the Adam moments along with the parameters (every replica
    continues from one identical state), or keep each replica's moments `local`."""

    # discrete/continuous: pararl's own (tuned on CartPole); image: rl-zoo's Atari DQN
    # (its target update every 1,000 env steps is 250 updates at one update per 4
    # steps; exploration over 10% of 10M steps); minatar: the MinAtar paper's DQN
    # (examples/dqn.py: one update per frame, target every 1,000 updates, epsilon to
    # 0.1 over 100k frames, centred RMSProp)
    BY_KIND: ClassVar[dict[EnvKind, dict[str, Any]]] = {
        "discrete": _DQN_VECTORS,
        "continuous": _DQN_VECTORS,
        "image": dict(
            total_steps=10_000_000, lr=1e-4, gamma=0.99, buffer_size=100_000, batch_size=32,
            learning_starts=100_000, replay_ratio=0.25, n_step=1, double_dqn=False,
            target_update=250, eps_end=0.01, eps_decay_steps=1_000_000, model="nature-cnn",
            optimizer="adam", eval_every=50_000,
        ),
        "minatar": dict(
            total_steps=5_000_000, lr=2.5e-4, gamma=0.99, buffer_size=100_000, batch_size=32,
            learning_starts=5_000, replay_ratio=1.0, n_step=1, double_dqn=False,
            target_update=1_000, eps_end=0.1, eps_decay_steps=100_000, model="minatar-cnn",
            optimizer="rmsprop", eval_every=10_000,
        ),
    }  # fmt: skip

    def validate(self) -> None:
        super().validate()

        def unset_or(value: Any, ok: Callable[[Any], bool]) -> bool:
            return value is None or ok(value)

        both = self.buffer_size is not None and self.batch_size is not None
        checks = [
            (unset_or(self.lr, lambda v: v > 0), "--lr must be > 0"),
            (unset_or(self.gamma, lambda v: 0 < v <= 1), "--gamma must be in (0, 1]"),
            (
                not both or self.buffer_size >= self.batch_size,  # type: ignore[operator]
                "--buffer-size must be >= --batch-size",
            ),
            (unset_or(self.batch_size, lambda v: v >= 1), "--batch-size must be >= 1"),
            (unset_or(self.buffer_size, lambda v: v >= 1), "--buffer-size must be >= 1"),
            (unset_or(self.replay_ratio, lambda v: v >= 0), "--replay-ratio must be >= 0"),
            (unset_or(self.n_step, lambda v: v >= 1), "--n-step must be >= 1"),
            (0 < self.tau <= 1, "--tau must be in (0, 1]"),
            (unset_or(self.target_update, lambda v: v >= 1), "--target-update must be >= 1"),
            (0 <= self.eps_start <= 1, "--eps-start must be in [0, 1]"),
            (
                unset_or(self.eps_end, lambda v: 0 <= v <= self.eps_start),
                "need 0 <= --eps-end <= --eps-start <= 1",
            ),
            (unset_or(self.eps_decay_steps, lambda v: v >= 1), "--eps-decay-steps must be >= 1"),
            (self.sync_every >= 1, "--sync-every must be >= 1"),
            (self.priority_alpha >= 0, "--priority-alpha must be >= 0"),
            (0 <= self.priority_beta <= 1, "--priority-beta must be in [0, 1]"),
            (self.average_every >= 1, "--average-every must be >= 1"),
            (all(h >= 1 for h in self.hidden), "--hidden widths must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)

    @property
    def settings(self) -> DQNSettings:
        """The kind-dependent fields, once filled in (`for_env`)."""
        return settings_of(self, DQNSettings)


_PPO_ATARI: dict[str, Any] = dict(
    total_steps=10_000_000, num_steps=128, lr=2.5e-4, gamma=0.99, gae_lambda=0.95,
    minibatch_size=256, update_epochs=4, clip_vloss=True, vf_coef=0.25, norm_obs=False,
    norm_reward=False, clip_coef=0.1, ent_coef=0.01,
)  # fmt: skip


@dataclass
class PPOConfig(RunConfig):
    """PPO (clipped surrogate, GAE, minibatch epochs) on batched env workers."""

    mode: Literal["auto", "serial", "sync"] = "auto"
    """`serial`: envs in this process; `sync`: ParallelVectorEnv workers step them while
    this process runs the policy on the whole batch; `auto`: sync when the envs' step
    time (measured at start-up) outweighs the round trip to the workers."""
    act_device: Literal["auto", "cpu", "cuda"] = "auto"
    """Device for acting (policy forward during sampling); `auto` times both at start-up."""
    learn_device: Literal["auto", "cpu", "cuda"] = "auto"
    """Device for the PPO update; `auto` times both at start-up and takes the faster."""
    model: ModelChoice = "auto"
    """Actor-critic: `mlp` on flattened observations, or one shared `nature-cnn` (Mnih
    et al. 2015) or `minatar-cnn` (Young & Tian 2019) trunk on images; `auto`: by the
    observations (images of 36 pixels a side or more get the Nature CNN, smaller ones
    the MinAtar CNN)."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor and critic MLPs."""
    shared_body: bool = False
    """One shared MLP body for actor and critic instead of two separate MLPs."""
    num_steps: int | None = None
    """Steps per env in each rollout (a rollout is num_steps x all envs). Default: by
    env kind."""
    lr: float | None = None
    """Adam learning rate. Default: by env kind."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over the step budget."""
    gamma: float | None = None
    """Discount factor. Default: by env kind."""
    gae_lambda: float | None = None
    """GAE lambda. Default: by env kind."""
    minibatch_size: int | None = None
    """Transitions per minibatch. Default: by env kind."""
    update_epochs: int | None = None
    """Passes over each rollout. Default: by env kind."""
    clip_coef: float | None = None
    """Surrogate clipping coefficient (also the value-clipping range). Default: by env
    kind."""
    anneal_clip: bool = False
    """Anneal the surrogate's clip range linearly to 0 over the step budget."""
    clip_vloss: bool | None = None
    """Clip the value loss around the rollout's value estimates (CleanRL's max of the
    clipped and unclipped errors). Off by default, as in SB3 and rl-zoo: on CartPole it
    took ~15% more env steps to solve (40 seeds), and on HalfCheetah with the continuous
    defaults it ended in the ~1,700 mode in 4 of 6 seeds against 1 of 6 without it
    (BENCHMARKS.md)."""
    ent_coef: float | None = None
    """Entropy bonus coefficient. Default: by env kind."""
    vf_coef: float | None = None
    """Value loss coefficient; the value loss is the mean squared error (SB3's scale;
    CleanRL halves the error, so its 0.5 is 0.25 here). Default: by env kind."""
    max_grad_norm: float = 0.5
    """Gradient-norm clipping threshold."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    norm_obs: bool | None = None
    """Normalise observations by their running mean and variance over all envs
    (updated after each rollout, saved with the policy, frozen in evaluation; never
    images). Default: by env kind."""
    norm_reward: bool | None = None
    """Scale rewards by the running standard deviation of the discounted return over
    all envs (for learning only; returns are always reported unscaled). Default: by env kind."""
    clip_obs: float = 10.0
    """Normalised observations are clipped to +-this."""
    clip_reward: float = 10.0
    """Scaled rewards are clipped to +-this."""
    manual_grad: bool = True
    """Compute the PPO gradient with pararl's hand-written backward pass for its MLP
    actor-critic (autograd's numbers to float rounding, a third less time per
    minibatch step); --no-manual-grad uses torch autograd."""
    double_buffer: bool = False
    """Sync mode: split the workers into two groups of envs; while one group steps, this
    process computes the other's actions (partial send/recv)."""

    # discrete: rl-zoo's CartPole settings; continuous: CleanRL's MuJoCo settings
    # (one env x 2048 steps there; 2 workers x 4 envs x 256 steps here) without its value
    # clipping (see clip_vloss), and the field's usual 1M-step budget; image: CleanRL's
    # ppo_atari (8 envs x 128 steps in 4 minibatches of 256; its value loss 0.5 x half
    # the squared error is 0.25 here); minatar: the same settings with the MinAtar CNN
    # (the MinAtar paper has no PPO) and the 10M-step budget of gymnax's MinAtar PPO
    BY_KIND: ClassVar[dict[EnvKind, dict[str, Any]]] = {
        "discrete": dict(
            total_steps=100_000, num_steps=32, lr=1e-3, gamma=0.98, gae_lambda=0.8,
            minibatch_size=256, update_epochs=20, clip_vloss=False, vf_coef=0.5,
            norm_obs=False, norm_reward=False, clip_coef=0.2, ent_coef=0.0, model="mlp",
            eval_every=2_500,
        ),
        "continuous": dict(
            total_steps=1_000_000, num_steps=256, lr=3e-4, gamma=0.99, gae_lambda=0.95,
            minibatch_size=64, update_epochs=10, clip_vloss=False, vf_coef=0.25,
            norm_obs=True, norm_reward=True, clip_coef=0.2, ent_coef=0.0, model="mlp",
            eval_every=2_500,
        ),
        "image": _PPO_ATARI | dict(model="nature-cnn", eval_every=50_000),
        "minatar": _PPO_ATARI | dict(model="minatar-cnn", eval_every=10_000),
    }  # fmt: skip

    def validate(self) -> None:
        super().validate()

        def unset_or(value: Any, ok: Callable[[Any], bool]) -> bool:
            return value is None or ok(value)

        checks = [
            (unset_or(self.num_steps, lambda v: v >= 1), "--num-steps must be >= 1"),
            (unset_or(self.lr, lambda v: v > 0), "--lr must be > 0"),
            (unset_or(self.gamma, lambda v: 0 < v <= 1), "--gamma must be in (0, 1]"),
            (unset_or(self.gae_lambda, lambda v: 0 <= v <= 1), "--gae-lambda must be in [0, 1]"),
            (unset_or(self.minibatch_size, lambda v: v >= 1), "--minibatch-size must be >= 1"),
            (unset_or(self.update_epochs, lambda v: v >= 1), "--update-epochs must be >= 1"),
            (unset_or(self.vf_coef, lambda v: v >= 0), "--vf-coef must be >= 0"),
            (unset_or(self.clip_coef, lambda v: v > 0), "--clip-coef must be > 0"),
            (unset_or(self.ent_coef, lambda v: v >= 0), "--ent-coef must be >= 0"),
            (self.clip_obs > 0, "--clip-obs must be > 0"),
            (self.clip_reward > 0, "--clip-reward must be > 0"),
            (all(h >= 1 for h in self.hidden), "--hidden widths must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(message)

    @property
    def settings(self) -> PPOSettings:
        """The kind-dependent fields, once filled in (`for_env`)."""
        return settings_of(self, PPOSettings)


__all__ = [
    "KIND_TEXT",
    "DQNConfig",
    "DQNSettings",
    "EnvKind",
    "ModelChoice",
    "PPOConfig",
    "PPOSettings",
    "RunConfig",
    "env_kind",
    "to_json",
]
