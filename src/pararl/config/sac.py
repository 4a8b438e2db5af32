"""The SAC run configuration (`pararl train sac`). Each field's docstring is its
`--help` text; `BY_KIND` holds the defaults by kind of env (continuous actions only:
SAC refuses discrete ones), `BY_ENV` those tuned for one env."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pararl.config.kinds import EnvKind
from pararl.config.offpolicy import replay_checks
from pararl.config.run import RunConfig, raise_first, unset_or


@dataclass
class SACConfig(RunConfig):
    """SAC (Haarnoja et al. 2018: tanh-squashed Gaussian policy, twin critics with
    min targets, automatic entropy temperature) on the actors-and-learner engine."""

    env: str = "Pendulum-v1"
    """Gymnasium env id with a Box action space (any registered id; `import`able
    modules via `module:EnvId`)."""
    mode: Literal["auto", "serial", "sync", "async"] = "auto"
    """`serial`: one process; `sync`: env workers + learning in between steps; `async`:
    actor processes act while the learner learns (default with more than one core)."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of the actor and of each critic (ReLU MLPs)."""
    lr: float | None = None
    """Adam learning rate of the actor, the critics and the temperature. Default: by env
    kind (Pendulum-v1: its own, rl-zoo's)."""
    gamma: float | None = None
    """Discount factor. Default: by env kind."""
    buffer_size: int | None = None
    """Replay memory capacity (transitions). Default: by env kind."""
    batch_size: int | None = None
    """Minibatch size of each gradient update. Default: by env kind."""
    learning_starts: int | None = None
    """Env steps of uniformly random actions before the first update. Default: by env
    kind (Pendulum-v1: its own, rl-zoo's)."""
    replay_ratio: float | None = None
    """Gradient updates per env step (the update-to-data ratio), held in every mode:
    async actors wait when the learner falls behind. 0 (async only): no ratio, the
    learner learns all the time. Default: by env kind."""
    n_step: int | None = None
    """Steps in the n-step return of the critics' targets. Default: by env kind."""
    tau: float | None = None
    """Polyak factor of the target critics per update. Default: by env kind."""
    alpha: float = 1.0
    """Entropy temperature at the start (tuned from there unless --no-autotune)."""
    autotune: bool = True
    """Tune the temperature toward the target entropy -|A| (Haarnoja et al. 2018,
    eq. 18); --no-autotune keeps --alpha fixed."""
    prioritized: bool = False
    """Prioritized replay (proportional; Schaul et al. 2016) on the critics' TD errors:
    batches drawn in proportion to |TD error|^alpha, losses weighted by importance
    weights, beta annealed to 1. New transitions get the largest priority seen."""
    priority_alpha: float = 0.6
    """Prioritized replay: priority exponent alpha (0: uniform)."""
    priority_beta: float = 0.4
    """Prioritized replay: importance-sampling exponent at the start, annealed to 1."""
    sync_every: int = 16
    """Async: actors load new weights every this many of their vector steps."""
    acting_lag: int = 0
    """Serial and sync: act with the weights of this many gradient updates ago instead
    of the newest, the lag an async actor has (`policy_lag` in its metrics.csv), to
    measure what that lag alone costs. Keeps that many copies of the network."""
    restart_actors: bool = False
    """Async: replace an actor that crashes or dies, keeping the replay data stored."""

    # continuous: rl-zoo's MuJoCo SAC (hyperparams/sac.yml, HalfCheetah/Hopper: SB3's
    # defaults with 10k random steps first): 256x256 (`hidden`), lr 3e-4, batch 256,
    # tau 0.005, gamma 0.99, one update per env step, 1M transitions, 1M steps
    BY_KIND: ClassVar[dict[EnvKind, dict[str, Any]]] = {
        "continuous": dict(
            total_steps=1_000_000, lr=3e-4, gamma=0.99, buffer_size=1_000_000,
            batch_size=256, learning_starts=10_000, replay_ratio=1.0, n_step=1, tau=0.005,
            eval_every=10_000, checkpoint_every=50_000,
        ),
    }  # fmt: skip
    # Pendulum-v1: rl-zoo's tuned row (lr 1e-3, 20k steps) over SB3's SAC defaults
    # (100 random steps first); the MuJoCo row's other values are SB3's defaults too
    BY_ENV: ClassVar[dict[str, dict[str, Any]]] = {
        "Pendulum-v1": dict(
            total_steps=20_000, lr=1e-3, learning_starts=100, eval_every=1_000,
            checkpoint_every=5_000,
        ),
    }  # fmt: skip

    def validate(self) -> None:
        super().validate()
        raise_first(
            [
                *replay_checks(self),
                (unset_or(self.tau, lambda v: 0 < v <= 1), "--tau must be in (0, 1]"),
                (self.alpha > 0, "--alpha must be > 0"),
            ]
        )


__all__ = ["SACConfig"]
