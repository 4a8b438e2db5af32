"""The TD3 run configuration (`pararl train td3`). Each field's docstring is its
`--help` text; `BY_KIND` holds the defaults by kind of env (continuous actions only),
`BY_ENV` those tuned for one env."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pararl.config.kinds import EnvKind
from pararl.config.offpolicy import replay_checks
from pararl.config.run import RunConfig, raise_first, unset_or


@dataclass
class TD3Config(RunConfig):
    """TD3 (Fujimoto et al. 2018: a deterministic actor, twin critics with min targets,
    target policy smoothing, delayed actor updates) on the actors-and-learner engine."""

    env: str = "Pendulum-v1"
    """Gymnasium env id with a Box action space (any registered id; `import`able
    modules via `module:EnvId`)."""
    mode: Literal["auto", "serial", "sync", "async"] = "auto"
    """`serial`: one process; `sync`: env workers + learning in between steps; `async`:
    actor processes act while the learner learns (default with more than one core)."""
    hidden: tuple[int, ...] = (400, 300)
    """Hidden layer widths of the actor and of each critic (ReLU MLPs)."""
    lr: float | None = None
    """Adam learning rate of the actor and the critics. Default: by env kind."""
    gamma: float | None = None
    """Discount factor. Default: by env kind."""
    buffer_size: int | None = None
    """Replay memory capacity (transitions). Default: by env kind."""
    batch_size: int | None = None
    """Minibatch size of each gradient update. Default: by env kind."""
    learning_starts: int | None = None
    """Env steps of uniformly random actions before the first update. Default: by env
    kind."""
    replay_ratio: float | None = None
    """Gradient updates per env step, held in every mode: async actors wait when the
    learner falls behind. 0 (async only): no ratio. Default: by env kind."""
    n_step: int | None = None
    """Steps in the n-step return of the critics' targets. Default: by env kind."""
    tau: float | None = None
    """Polyak factor of the target networks per actor update. Default: by env kind."""
    exploration_noise: float | None = None
    """Standard deviation of the Gaussian noise on the actors' actions, as a fraction
    of half the action range. Default: by env kind."""
    policy_delay: int = 2
    """Critic updates per actor (and target) update."""
    target_noise: float = 0.2
    """Standard deviation of the target policy's smoothing noise (fraction of half the
    action range)."""
    target_noise_clip: float = 0.5
    """The smoothing noise is clipped to +- this (fraction of half the action range)."""
    prioritized: bool = False
    """Prioritized replay (proportional; Schaul et al. 2016) on the critics' TD errors."""
    priority_alpha: float = 0.6
    """Prioritized replay: priority exponent alpha (0: uniform)."""
    priority_beta: float = 0.4
    """Prioritized replay: importance-sampling exponent at the start, annealed to 1."""
    sync_every: int = 16
    """Async: actors load new weights every this many of their vector steps."""
    acting_lag: int = 0
    """Serial and sync: act with the weights of this many gradient updates ago instead
    of the newest (the lag an async actor has), to measure what that lag alone costs."""
    restart_actors: bool = False
    """Async: replace an actor that crashes or dies, keeping the replay data stored."""

    # continuous: rl-zoo's MuJoCo TD3 (hyperparams/td3.yml: 400x300, lr 1e-3, batch
    # 256, 10k random steps, Gaussian exploration noise 0.1, one update per step) over
    # SB3's TD3 defaults (1M transitions, tau 0.005, gamma 0.99, policy delay 2, target
    # noise 0.2 clipped at 0.5)
    BY_KIND: ClassVar[dict[EnvKind, dict[str, Any]]] = {
        "continuous": dict(
            total_steps=1_000_000, lr=1e-3, gamma=0.99, buffer_size=1_000_000,
            batch_size=256, learning_starts=10_000, replay_ratio=1.0, n_step=1, tau=0.005,
            exploration_noise=0.1, eval_every=10_000, checkpoint_every=50_000,
        ),
    }  # fmt: skip
    # Pendulum-v1: pararl's own (a short run of the MuJoCo row, 1k random steps first)
    BY_ENV: ClassVar[dict[str, dict[str, Any]]] = {
        "Pendulum-v1": dict(
            total_steps=20_000, learning_starts=1_000, eval_every=1_000,
            checkpoint_every=5_000,
        ),
    }  # fmt: skip

    def validate(self) -> None:
        super().validate()
        raise_first(
            [
                *replay_checks(self),
                (unset_or(self.tau, lambda v: 0 < v <= 1), "--tau must be in (0, 1]"),
                (
                    unset_or(self.exploration_noise, lambda v: v >= 0),
                    "--exploration-noise must be >= 0",
                ),
                (self.policy_delay >= 1, "--policy-delay must be >= 1"),
                (self.target_noise >= 0, "--target-noise must be >= 0"),
                (self.target_noise_clip >= 0, "--target-noise-clip must be >= 0"),
                (
                    self.eval_actions == "greedy",
                    "TD3's policy is deterministic: drop --eval-actions sampled",
                ),
            ]
        )


__all__ = ["TD3Config"]
