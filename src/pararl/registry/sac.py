"""SAC's spec: the off-policy engine (serial, sync, async, Ray) with SAC's learner;
it acts with its squashed Gaussian actor."""

from __future__ import annotations

from typing import Any

from pararl.config import SACConfig
from pararl.registry.spec import Algorithm


def train(config: SACConfig, **kwargs: Any) -> Any:
    from pararl.algos.sac import check_spaces
    from pararl.runners import sac
    from pararl.runners.setup import compose

    return compose(config, "sac", check_spaces, sac.plan, **kwargs)


def policy(config: SACConfig, checkpoint: dict[str, Any]) -> Any:
    from pararl.algos.sac import load_policy

    return load_policy(config, checkpoint)


SPEC = Algorithm(
    "sac", "train SAC for continuous actions (actors + learner)", SACConfig, train, policy
)
