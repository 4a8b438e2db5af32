"""TD3's spec: the off-policy engine (serial, sync, async, Ray) with TD3's learner;
it acts with its deterministic actor (plus Gaussian noise while it explores)."""

from __future__ import annotations

from typing import Any

from pararl.config.td3 import TD3Config
from pararl.registry.spec import Algorithm


def train(config: TD3Config, **kwargs: Any) -> Any:
    from pararl.algos.td3 import check_spaces
    from pararl.runners.setup import compose

    return compose(config, "td3", check_spaces, plan, **kwargs)


def plan(p: Any) -> Any:
    """A TD3 run on the off-policy engine: its state, on the device asked for."""
    from pararl.algos.fused import resolve_step_mode
    from pararl.algos.td3 import METRICS, TD3State
    from pararl.devices import resolve_device
    from pararl.models import num_params
    from pararl.runners import offpolicy

    cfg: TD3Config = p.config
    device = resolve_device(cfg.device)
    mode = offpolicy.resolve_mode(cfg)
    step_mode = resolve_step_mode(cfg.compile, device)
    state = TD3State(
        p.filled, p.observation_space, p.action_space, device, p.resume_state, step_mode
    )
    params = num_params(state.learner.actor) + num_params(state.learner.critic)
    return offpolicy.plan(p, state, "TD3", mode, METRICS, params)


def policy(config: TD3Config, checkpoint: dict[str, Any]) -> Any:
    from pararl.algos.td3 import load_policy

    return load_policy(config, checkpoint)


SPEC = Algorithm(
    "td3", "train TD3 for continuous actions (actors + learner)", TD3Config, train, policy
)
