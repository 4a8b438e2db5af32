"""DQN on the off-policy engine (`runners.offpolicy`): its run state, its image frame
stacks, its metrics. Every mode (serial, sync, async, Ray) is the one off-policy
learner loop; parameter averaging runs that loop in every replica
(`runners.averaging`); `--seeds N` trains N agents in one batched loop
(`runners.dqn_population`)."""

from __future__ import annotations

import gymnasium as gym

from pararl.algos.dqn import DQNState
from pararl.config import DQNConfig
from pararl.devices import resolve_device
from pararl.envs.make import env_factory
from pararl.images import is_image
from pararl.models import num_params
from pararl.replay.frame_steps import stack_size
from pararl.runners import offpolicy
from pararl.runners.setup import Plan, Prepared

# metrics.csv columns of a DQN run, beside the session's and the loop's
# (`offpolicy.METRICS`): the exploration, the learner's update (`algos.dqn`), the
# time of an average (`runners.averaging`)
METRICS = ("epsilon", "loss", "q_mean", "sync_ms")


def frame_stack(cfg: DQNConfig, observation_space: gym.Space) -> int:
    """How many frames the env's image observations stack (0: not stacked frames)."""
    if not is_image(observation_space):
        return 0
    env = env_factory(cfg.env, cfg.wrapper, training=True, kwargs=cfg.env_kwargs)()
    try:
        return stack_size(env)
    finally:
        env.close()


def plan(p: Prepared) -> Plan:
    """A single-learner DQN run (serial, sync, async, Ray); or N agents in one
    (`--seeds N`: `runners.dqn_population`)."""
    cfg: DQNConfig = p.config
    if cfg.seeds > 1:  # N agents in one run: its own loop (imported here: it uses ours)
        from pararl.runners import dqn_population

        return dqn_population.plan(p)
    device = resolve_device(cfg.device)
    mode = offpolicy.resolve_mode(cfg)
    stack = frame_stack(cfg, p.observation_space)
    state = DQNState(
        p.filled,
        p.observation_space,
        p.action_space,
        device,
        p.resume_state,
        frame_stack=stack,
        action_masks=p.action_masks,
    )
    return offpolicy.plan(p, state, "DQN", mode, METRICS, num_params(state.learner.q))


__all__ = ["METRICS", "frame_stack", "plan"]
