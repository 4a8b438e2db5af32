"""SAC on the off-policy engine (`runners.offpolicy`): the same learner loop, chunk
sources, replay and weight shipping as DQN, with SAC's run state (`algos.sac`), whose
actors sample the squashed Gaussian (`algos.offpolicy.UniformFirst`)."""

from __future__ import annotations

from pararl.algos.sac import SACState, compile_pays
from pararl.runners import offpolicy
from pararl.runners.setup import Plan, Prepared

# metrics.csv columns of a SAC run, beside the session's and the loop's
# (`offpolicy.METRICS`): the statistics of its update (`algos.sac`)
METRICS = ("critic_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")


def plan(p: Prepared) -> Plan:
    """A SAC run (serial, sync, async, Ray); `--compile auto` compiles a long one."""
    return offpolicy.plan_actor_critic(p, SACState, "SAC", METRICS, compile_pays)


__all__ = ["METRICS", "plan"]
