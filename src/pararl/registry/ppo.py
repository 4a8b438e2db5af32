"""PPO's spec: batched env workers (serial, sync, Ray) and one learner; it acts with
its actor-critic."""

from __future__ import annotations

from typing import Any

from pararl.config import PPOConfig
from pararl.registry.spec import Algorithm


def train(config: PPOConfig, **kwargs: Any) -> Any:
    from pararl.algos.ppo import check_spaces
    from pararl.runners import ppo
    from pararl.runners.setup import compose

    return compose(config, "ppo", check_spaces, ppo.plan, **kwargs)


def policy(config: PPOConfig, checkpoint: dict[str, Any]) -> Any:
    from pararl.algos.ppo import load_policy

    return load_policy(config, checkpoint)


SPEC = Algorithm("ppo", "train PPO (batched env workers)", PPOConfig, train, policy)
