"""TD3's spec: the off-policy engine (serial, sync, async, Ray) with TD3's learner;
it acts with its deterministic actor (plus Gaussian noise while it explores)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pararl.config.td3 import TD3Config
from pararl.registry.spec import Algorithm

if TYPE_CHECKING:
    from pararl.runners.setup import Plan, Prepared


def train(config: TD3Config, **kwargs: Any) -> Any:
    from pararl.algos.td3 import check_spaces
    from pararl.runners.setup import compose

    return compose(config, "td3", check_spaces, plan, **kwargs)


def plan(p: Prepared) -> Plan:
    """A TD3 run on the off-policy engine (serial, sync, async, Ray)."""
    from pararl.algos.td3 import METRICS, TD3State
    from pararl.runners.offpolicy import plan_actor_critic

    return plan_actor_critic(p, TD3State, "TD3", METRICS)


def policy(config: TD3Config, checkpoint: dict[str, Any]) -> Any:
    from pararl.algos.td3 import load_policy

    return load_policy(config, checkpoint)


SPEC = Algorithm(
    "td3", "train TD3 for continuous actions (actors + learner)", TD3Config, train, policy
)
