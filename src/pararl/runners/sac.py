"""SAC on the off-policy engine (`runners.offpolicy`): the same learner loop, chunk
sources, replay and weight shipping as DQN, with SAC's run state (`algos.sac`), whose
actors sample the squashed Gaussian (`algos.offpolicy.UniformFirst`)."""

from __future__ import annotations

from pararl.algos.fused import resolve_step_mode
from pararl.algos.sac import SACState, compile_pays
from pararl.config import SACConfig
from pararl.devices import resolve_device
from pararl.models import num_params
from pararl.runners import offpolicy
from pararl.runners.setup import Plan, Prepared

# metrics.csv columns of a SAC run, beside the session's and the loop's
# (`offpolicy.METRICS`): the statistics of its update (`algos.sac`)
METRICS = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")


def plan(p: Prepared) -> Plan:
    """A SAC run (serial, sync, async, Ray)."""
    cfg: SACConfig = p.config
    device = resolve_device(cfg.device)
    mode = offpolicy.resolve_mode(cfg)
    step_mode = resolve_step_mode(cfg.compile, device, compile_pays(cfg, mode, device))
    state = SACState(
        p.filled, p.observation_space, p.action_space, device, p.resume_state, step_mode
    )
    learner = state.learner
    params = num_params(learner.actor) + num_params(learner.critic)
    return offpolicy.plan(p, state, "SAC", mode, METRICS, params)


__all__ = ["METRICS", "plan"]
