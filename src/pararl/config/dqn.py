"""The DQN run configuration (`pararl train dqn`). Each field's docstring is its
`--help` text; `BY_KIND` holds the defaults by kind of env."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pararl.config.kinds import EnvKind, ModelChoice
from pararl.config.offpolicy import replay_checks
from pararl.config.run import RunConfig, raise_first, unset_or

_DQN_VECTORS: dict[str, Any] = dict(
    total_steps=100_000, lr=2.5e-3, gamma=0.99, buffer_size=100_000, batch_size=64,
    learning_starts=1_000, replay_ratio=0.25, n_step=3, double_dqn=True, target_update=250,
    eps_end=0.05, eps_decay_steps=10_000, model="mlp", optimizer="adam", eval_every=2_500,
    checkpoint_every=25_000,
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
    seeds: int = 1
    """Agents to train in this run, one per seed: --seed, --seed + 1, ... Each has
    its own envs (as many as its run alone has; every agent's stepped by the same
    workers, or by one actor process in `--mode async`), initialisation, replay
    memory, exploration, target network, optimizer state and evaluations, as its run
    alone would, and all are updated in one batched pass (uniform replay; not the
    multi-input encoder). --total-steps is each agent's budget, --buffer-size each
    agent's memory. metrics.csv and eval.csv get an `agent` column; `pararl evaluate
    RUN --agent i` picks one, and `pararl compare` reads them all."""
    model: ModelChoice = "auto"
    """Q-network: `mlp` on flattened observations, `nature-cnn` (Mnih et al. 2015) or
    `minatar-cnn` (Young & Tian 2019) on images, `multi-input` on Dict and Tuple
    observations (a CNN per image key, the others flattened or one-hot, under an MLP
    of --hidden) and on Discrete and MultiDiscrete ones (one-hot); `auto`: by the
    observations (images of 36 pixels a side or more get the Nature CNN, smaller ones
    the MinAtar CNN, Dict, Tuple, Discrete and MultiDiscrete ones multi-input)."""
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
    acting_lag: int = 0
    """Serial and sync: act with the weights of this many gradient updates ago instead
    of the newest, the lag an async actor has (`policy_lag` in its metrics.csv), to
    measure what that lag alone costs. Keeps that many copies of the network."""
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
            optimizer="adam", eval_every=50_000, checkpoint_every=500_000,
        ),
        "minatar": dict(
            total_steps=5_000_000, lr=2.5e-4, gamma=0.99, buffer_size=100_000, batch_size=32,
            learning_starts=5_000, replay_ratio=1.0, n_step=1, double_dqn=False,
            target_update=1_000, eps_end=0.1, eps_decay_steps=100_000, model="minatar-cnn",
            optimizer="rmsprop", eval_every=10_000, checkpoint_every=250_000,
        ),
    }  # fmt: skip

    def validate(self) -> None:
        super().validate()
        raise_first(
            [
                *replay_checks(self),
                (0 < self.tau <= 1, "--tau must be in (0, 1]"),
                (unset_or(self.target_update, lambda v: v >= 1), "--target-update must be >= 1"),
                (0 <= self.eps_start <= 1, "--eps-start must be in [0, 1]"),
                (
                    unset_or(self.eps_end, lambda v: 0 <= v <= self.eps_start),
                    "need 0 <= --eps-end <= --eps-start <= 1",
                ),
                (
                    unset_or(self.eps_decay_steps, lambda v: v >= 1),
                    "--eps-decay-steps must be >= 1",
                ),
                (self.average_every >= 1, "--average-every must be >= 1"),
                (self.seeds >= 1, "--seeds must be >= 1 (the number of agents to train)"),
                (
                    self.eval_actions == "greedy",
                    "DQN's policy is greedy in its Q-values: drop --eval-actions sampled "
                    "(it is for PPO and SAC)",
                ),
            ]
        )


__all__ = ["DQNConfig"]
