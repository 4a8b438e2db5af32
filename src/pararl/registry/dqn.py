"""DQN's spec: one learner over any sampler (serial, sync, async, Ray), or replicas
that average (`--mode averaging`); it acts with its Q-network."""

from __future__ import annotations

from typing import Any

from pararl.config import DQNConfig
from pararl.registry.spec import Algorithm


def train(config: DQNConfig, **kwargs: Any) -> Any:
    """The finished session, or None on a torchrun rank other than 0 of
    `--mode averaging` (it owns no run)."""
    from pararl.algos.dqn import check_spaces
    from pararl.runners import averaging, dqn
    from pararl.runners.setup import compose

    if averaging.uses_averaging(config) and config.seeds == 1:  # --seeds refuses it
        return averaging.train_averaging(config, **kwargs)
    return compose(config, "dqn", check_spaces, dqn.plan, **kwargs)


def policy(config: DQNConfig, checkpoint: dict[str, Any]) -> Any:
    from pararl.algos.dqn import load_policy

    return load_policy(config, checkpoint)


SPEC = Algorithm(
    "dqn",
    "train DQN (actors + learner)",
    DQNConfig,
    train,
    policy,
    sampled_epsilon=lambda config: config.settings.eps_end,
)
