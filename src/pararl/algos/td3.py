"""TD3: the learner and the run's state (its actor, whose sampled actions are its
exploration, is `models.deterministic`) (actor, twin critics and their targets, replay memory,
counters, checkpoint).

    a'    = clip(pi'(s') + clip(eps, -c, c), low, high),      eps ~ N(0, sigma~^2)
    y     = G + gamma^n min_j Q'_j(s', a')
    J_Q   = sum_j E[(Q_j(s, a) - y)^2]
    J_pi  = -E[Q_1(s, pi(s))]                       every `policy_delay` critic steps,
    theta' <- tau theta + (1 - tau) theta'           then the targets, actor's and critics'

`G` and `gamma^n` are the replay's n-step return and discount: the discount is 0 only
after a termination, so a time-limit truncation bootstraps from `s'`. Noise scales
(`exploration_noise`, `target_noise`, `target_noise_clip`) are fractions of half the
action range, as SB3 applies them to actions rescaled to [-1, 1].

References: Fujimoto et al. 2018, "Addressing Function Approximation Error in
Actor-Critic Methods" (Algorithm 1); settings are rl-zoo's MuJoCo TD3 (`config.td3`).
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl.algos.fused import FusedSteps, StepMode, program_boundary
from pararl.algos.offpolicy import ActorCriticState, check_box_actions
from pararl.config import Filled
from pararl.config.td3 import TD3Config
from pararl.models.critics import TwinQ
from pararl.models.deterministic import DeterministicActor, make_actor
from pararl.optim import FlatAdam, views_into
from pararl.replay.nstep import Transitions

# metrics.csv columns of a TD3 run, beside the session's and the off-policy loop's
METRICS = ("critic_loss", "actor_loss", "q_mean")


class TD3Learner:
    """Owns the actor, the twin critics, their target copies and two flat Adams on one
    device. A critic step runs every update; the actor's and the targets' every
    `policy_delay`-th (two fused programs: `algos.fused`). The smoothing noise is
    drawn before the step from the learner's own generator."""

    def __init__(
        self,
        actor: DeterministicActor,
        critic: TwinQ,
        config: TD3Config,
        device: torch.device,
        step_mode: StepMode = "eager",
        noise_seed: int = 0,
    ) -> None:
        self.config, self.settings = config, config.settings
        self.device, self.step_mode = device, step_mode
        self.actor = actor.to(device)
        self.critic = critic.to(device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        capturable = step_mode != "eager"
        lr = self.settings.lr
        self.actor_optimizer = FlatAdam(self.actor.parameters(), lr=lr, capturable=capturable)
        self.critic_optimizer = FlatAdam(self.critic.parameters(), lr=lr, capturable=capturable)
        # each target network in one vector: its Polyak update is one op
        self.targets = [
            (self.actor_optimizer.flat.detach().clone(), self.actor_optimizer, self.actor_target),
            (
                self.critic_optimizer.flat.detach().clone(),
                self.critic_optimizer,
                self.critic_target,
            ),
        ]
        for flat, _, target in self.targets:
            views_into(target, flat)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(noise_seed)
        # variants: (importance weights given, the actor's turn)
        self.steps: FusedSteps[tuple[bool, bool]] = FusedSteps(step_mode, device)
        self.updates = 0
        self._last_actor_loss = torch.zeros((), device=device)

    def seed_noise(self, seed: int) -> None:
        """Start the smoothing noise on a new stream (a resumed run)."""
        self.generator.manual_seed(seed)

    def _tensor(self, array: Any) -> torch.Tensor:
        return torch.as_tensor(array, dtype=torch.float32).to(self.device, non_blocking=True)

    def update(
        self, batch: Transitions, weights: np.ndarray | None = None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One critic step on a minibatch (and, every `policy_delay`-th, an actor step
        and the target networks' Polyak update); each sample's critic loss weighted by
        `weights` if given. Returns the statistics and each sample's TD error."""
        noise = torch.randn(
            (len(batch), self.actor.action_dim), generator=self.generator, device=self.device
        )
        inputs = [
            self._tensor(batch.obs),
            self._tensor(batch.action),
            self._tensor(batch.ret),
            self._tensor(batch.next_obs),
            self._tensor(batch.discount),
            noise,
        ]
        if weights is not None:
            inputs.append(self._tensor(weights))
        self.updates += 1
        actor_turn = self.updates % self.config.policy_delay == 0
        key = (weights is not None, actor_turn)
        step = self.steps.get(key, lambda: functools.partial(self._step, actor_turn=actor_turn))
        critic_loss, actor_loss, q_mean, td_error = step(*inputs)
        if actor_turn:
            self._last_actor_loss = actor_loss
        stats = {"critic_loss": critic_loss, "actor_loss": self._last_actor_loss, "q_mean": q_mean}
        return stats, td_error

    @torch.no_grad()
    def td_target(
        self, ret: torch.Tensor, next_obs: torch.Tensor, discount: torch.Tensor, noise: torch.Tensor
    ) -> torch.Tensor:
        """y = G + gamma^n min_j Q'_j(s', a'), a' the target actor's action smoothed by
        clipped noise and kept within the bounds."""
        scale = self.actor.scale
        c = self.config.target_noise_clip
        smoothing = (noise * self.config.target_noise).clamp(-c, c) * scale
        next_action = torch.max(
            torch.min(self.actor_target(next_obs) + smoothing, self.actor.high), self.actor.low
        )
        next_q = self.critic_target(next_obs, next_action).min(dim=0).values
        return ret + discount * next_q

    def _step(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        ret: torch.Tensor,
        next_obs: torch.Tensor,
        discount: torch.Tensor,
        noise: torch.Tensor,
        weights: torch.Tensor | None = None,
        *,
        actor_turn: bool,
    ) -> tuple[torch.Tensor, ...]:
        """Algorithm 1's update: the critics toward the clipped double-Q target; on the
        actor's turn, the deterministic policy gradient through Q_1, then the targets."""
        td_target = self.td_target(ret, next_obs, discount, noise)

        # critic loss: the squared TD error of each critic, summed over the two
        q = self.critic(obs, action)
        per_sample = ((q - td_target) ** 2).sum(dim=0)
        if weights is not None:  # importance sampling corrects prioritized draws
            per_sample = per_sample * weights
        critic_loss = per_sample.mean()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        actor_loss = torch.zeros((), device=obs.device)
        if actor_turn:
            program_boundary()  # compiled: the critics, just changed in place, are read next
            # actor loss: -Q_1(s, pi(s)), the deterministic policy gradient
            actor_loss = -self.critic.critic(0, obs, self.actor(obs)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward(inputs=self.actor_optimizer.params)
            self.actor_optimizer.step()
            # targets: theta' <- tau theta + (1 - tau) theta'
            with torch.no_grad():
                for flat, optimizer, _ in self.targets:
                    flat.lerp_(optimizer.flat, self.settings.tau)
        td_error = (td_target - q.detach()).abs().mean(dim=0)
        return critic_loss.detach(), actor_loss.detach(), q.detach().mean(), td_error

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "actor_target": self.actor_target.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "updates": self.updates,
            # logged with every update until the next actor step: a resumed run's
            # first log rows show the last one, not 0
            "last_actor_loss": float(self._last_actor_loss),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.actor_target.load_state_dict(state["actor_target"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.updates = int(state["updates"])
        last = float(state.get("last_actor_loss", 0.0))  # absent from the first checkpoints
        self._last_actor_loss = torch.tensor(last, device=self.device)


def check_spaces(config: TD3Config, observation_space: gym.Space, action_space: gym.Space) -> None:
    """TD3's spaces: a 1-D Box of actions with finite bounds, vector observations."""
    check_box_actions("TD3", config.env, observation_space, action_space)


class TD3State(ActorCriticState[TD3Learner]):
    """What a TD3 run is made of, and how it is checkpointed: from a config filled in
    for the env's kind (`RunConfig.for_env`); its actors act with the actor plus its
    noise after uniform first steps (`algos.offpolicy.UniformFirst`)."""

    ALGO = "td3"

    def __init__(
        self,
        filled: Filled[TD3Config],
        observation_space: gym.Space,
        action_space: gym.Space,
        device: torch.device,
        resume_state: dict[str, Any] | None = None,
        step_mode: StepMode = "eager",
    ) -> None:
        cfg = filled.config
        check_spaces(cfg, observation_space, action_space)
        self.filled, self.config, self.settings = filled, cfg, cfg.settings
        obs_dim = self._spaces(observation_space, action_space)
        self.make_model = functools.partial(
            make_actor,
            obs_dim,
            self.action_dim,
            cfg.hidden,
            self.low,
            self.high,
            self.settings.exploration_noise,
        )
        critic = TwinQ(obs_dim, self.action_dim, cfg.hidden)
        self.learner = TD3Learner(self.make_model(), critic, cfg, device, step_mode)
        self._memory(resume_state)


def load_policy(config: TD3Config, state: dict[str, Any]) -> DeterministicActor:
    """The actor of a checkpoint (`pararl evaluate`, `pararl.load`)."""
    low = np.asarray(state["action_low"], np.float32)
    high = np.asarray(state["action_high"], np.float32)
    obs_dim = int(np.prod(state["obs_shape"]))
    noise = config.settings.exploration_noise  # a saved config is filled in
    actor = make_actor(obs_dim, len(low), config.hidden, low, high, noise)
    actor.load_state_dict(state["learner"]["actor"])
    return actor


__all__ = [
    "METRICS",
    "TD3Learner",
    "TD3State",
    "check_spaces",
    "load_policy",
]
