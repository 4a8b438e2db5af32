"""The PPO Ray actor: a batch of envs (SAME_STEP autoreset) and a CPU copy of the
actor-critic, returning rollout segments through the object store.

A segment is what `runners.ppo.collect` makes of `num_steps` steps of this actor's
envs: observations, actions, log-probs and values, and advantages and returns by
GAE — computed here, per env, with the same weights that acted (the values of
truncated episodes' final observations and of the last observation included), so
the driver only concatenates segments. The acting copy lives in a CPU `PPOState`
built from the run's config, so acting is exactly the local path's code.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pararl.config import PPOConfig
from pararl.envs.make import env_factory
from pararl.raybackend.dqn_actor import load_numpy_state
from pararl.vector import SerialVectorEnv


@dataclass
class Segment:
    """One actor's share of a rollout, flattened to [num_steps * envs, ...]."""

    batch: dict[str, np.ndarray]
    env_steps: int
    episodes: list[dict[str, Any]]  # `final_info` dicts of steps where episodes ended
    version: int


class PPOActor:
    """Made in its own Ray worker process (one CPU); see the module docstring."""

    def __init__(self, config: PPOConfig, num_envs: int, seed: int) -> None:
        from pararl.runners.ppo import PPOState

        torch.set_num_threads(1)
        cfg = dataclasses.replace(config, act_device="cpu", learn_device="cpu", seed=seed)
        fns = [env_factory(cfg.env, cfg.wrapper)] * num_envs
        self.envs = SerialVectorEnv(fns, autoreset_mode="SameStep")
        obs_space, act_space = self.envs.single_observation_space, self.envs.single_action_space
        self.state = PPOState(cfg, obs_space, act_space, num_envs)
        self.obs, _ = self.envs.reset(seed=seed)
        self.version = -1

    def rollout(self, weights: list[Any], version: int) -> Segment:
        """`num_steps` steps of every env with weights `version`."""
        from pararl.runners.ppo import collect

        if version != self.version:
            import ray

            load_numpy_state(self.state.actor, ray.get(weights[0]))
            self.version = version
        episodes: list[dict[str, Any]] = []

        def keep(infos: dict[str, Any]) -> None:
            if "episode" in infos:
                episodes.append(infos)

        start = self.state.env_steps
        batch, self.obs = collect(self.state, self.envs, self.obs, keep)
        return Segment(batch, self.state.env_steps - start, episodes, version)

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())
