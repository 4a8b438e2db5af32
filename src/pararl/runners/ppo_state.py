"""A PPO run's state around its learner (`pararl.algos.ppo`): the model built from the
config, acting and learning each placed on the device measured to be faster, the
acting copy and the sender that keeps it current, the minibatches' random stream,
the counters, and what a checkpoint holds."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl import seeding
from pararl.algos.fused import resolve_step_mode
from pararl.algos.ppo import PPOHyper, PPOLearner, core_settings, norm_settings
from pararl.checkpoint import Header
from pararl.config import Filled, PPOConfig
from pararl.devices import choose_devices
from pararl.envs.masks import mask_info, mask_size
from pararl.images import is_image
from pararl.models import num_params
from pararl.models.build import actor_critic
from pararl.models.heads import head_for
from pararl.observations import encoded, is_discrete, stored
from pararl.samplers.rollout.collect import RolloutSpec
from pararl.weights.local import LocalCopy

# a model's parameter count -> the torch threads to act and to update it with
ThreadRule = Callable[[int], tuple[int, int]]


class PPOState:
    """The model on both devices, the learner, and the run's counters: from a config
    filled in for the env's kind (`RunConfig.for_env`)."""

    def __init__(
        self,
        filled: Filled[PPOConfig],
        obs_space: gym.Space,
        act_space: gym.Space,
        num_envs: int,
        resume_state: dict[str, Any] | None = None,
        threads: ThreadRule | None = None,
        action_masks: bool = False,
    ) -> None:
        """`threads`: the run's rule for its torch threads (`pararl.mp.threads.ppo_threads`),
        which `--act-device`/`--learn-device auto` time with; None: torch's count.
        `action_masks`: the env gives masks (`envs.masks`), which acting and the loss
        keep to."""
        self.filled = filled
        self.config = cfg = filled.config
        self.settings = s = cfg.settings
        self.obs_shape = tuple(obs_space.shape or ())
        self.obs_dtype = rollout_dtype(obs_space)
        self.head = head_for(act_space)  # how the actor's outputs become actions
        self.action_dim, self.discrete = self.head.logits, self.head.discrete
        self.mask_size = mask_size(act_space) if action_masks else 0
        self.mask_info = mask_info(act_space) if action_masks else None  # vector envs'
        # what the multi-input encoder reads (Dict and Tuple observations: their leaves,
        # each stored as its own array; a bare discrete one: one leaf, one array)
        self.leaves = encoded(obs_space)
        # Box bounds, saved so that a loaded agent clips its actions as the env does
        self.action_bounds: tuple[np.ndarray, np.ndarray] | None = None
        if isinstance(act_space, gym.spaces.Box):
            self.action_bounds = (act_space.low.ravel(), act_space.high.ravel())

        self.core = core_settings(cfg)  # a recurrent core, or None
        self.make_model = functools.partial(
            actor_critic,
            s.model,
            self.obs_shape,
            self.obs_dtype,
            self.action_dim,
            self.discrete,
            cfg.hidden,
            cfg.shared_body,
            norm_settings(cfg),
            self.head,
            self.leaves,
            self.core,
        )
        model = self.make_model()  # initialised from the seeded global torch stream
        # torch threads to act and to update with (no rule: torch's count for both)
        self.act_threads, self.update_threads = (
            threads(num_params(model)) if threads else (torch.get_num_threads(),) * 2
        )
        self.devices = choose_devices(
            self.make_model,
            self.obs_shape,
            num_envs,
            s.minibatch_size,
            cfg.act_device,
            cfg.learn_device,
            self.obs_dtype,
            act_threads=self.act_threads,
            update_threads=self.update_threads,
            leaves=self.leaves,
        )
        hyper = PPOHyper(
            clip_coef=s.clip_coef,
            clip_vloss=s.clip_vloss,
            ent_coef=s.ent_coef,
            vf_coef=s.vf_coef,
            max_grad_norm=cfg.max_grad_norm,
            norm_adv=cfg.norm_adv,
            update_epochs=s.update_epochs,
            num_minibatches=max(1, num_envs * s.num_steps // s.minibatch_size),
        )
        learn = self.devices.learn
        # a recurrent core replays pieces of sequences whose lengths vary: nothing to
        # compile or record once (`--compile on` is refused for it)
        step_mode = "eager" if model.recurrent else resolve_step_mode(cfg.compile, learn)
        self.learner = PPOLearner(model, hyper, s.lr, learn, step_mode)
        # the acting copy lives on the acting device; weights are copied once per update
        self.actor = (
            self.learner.model
            if self.devices.act == self.devices.learn
            else copy.deepcopy(self.learner.model).to(self.devices.act)
        )
        self.weights = LocalCopy(self.actor)
        self.env_steps, self.wall_s = 0, 0.0
        if resume_state is not None:
            self.learner.load_state_dict(resume_state["learner"])
            self.sync_actor()
            header = Header.of(resume_state)
            self.env_steps, self.wall_s = header.env_steps, header.wall_s
        self.rng = seeding.generator(cfg.seed, "replay", 0, self.env_steps)  # minibatches

    def sync_actor(self) -> None:
        self.weights.publish(self.learner.model, self.learner.updates)

    def state(self, wall_s: float) -> dict[str, Any]:
        """The checkpoint (`load_policy` in `pararl.algos.ppo` reads it back)."""
        return {
            # format 2: the model holds normalisation statistics
            **Header("ppo", 2, self.env_steps, wall_s).as_dict(),
            "learner": self.learner.state_dict(),
            "obs_shape": self.obs_shape,
            "obs_dtype": self.obs_dtype.str,
            "obs_leaves": [leaf.as_dict() for leaf in self.leaves],
            "action_dim": self.action_dim,
            "discrete": self.discrete,
            "action_head": self.head.describe(),
            "action_masks": self.mask_size > 0,
            "action_bounds": self.action_bounds,
        }

    @property
    def rollout_spec(self) -> RolloutSpec:
        s = self.settings
        return RolloutSpec(
            self.obs_shape,
            self.head.action_shape,
            self.head.action_dtype,
            s.num_steps,
            s.gamma,
            s.gae_lambda,
            self.obs_dtype,
            self.mask_size,
            stored(self.leaves),
            self.learner.model.state_shape,
        )


def rollout_dtype(space: gym.Space) -> np.dtype:
    """How observations are stored: images and bare discrete values in their own
    dtype (a quarter of the memory for uint8, converted on the learner's device;
    indices that stay exact), others as float32."""
    keep = is_image(space) or is_discrete(space)
    return np.dtype(space.dtype) if keep else np.dtype(np.float32)


__all__ = ["PPOState", "ThreadRule", "rollout_dtype"]
