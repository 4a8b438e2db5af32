"""SAC: the learner, whose one gradient step updates the critics, the actor, the
temperature and the target critics; and the run's state (actor, twin critics and
their targets, entropy temperature, replay memory, counters, checkpoint format).

    y     = G + gamma^n (min_j Q'_j(s', a') - alpha log pi(a'|s')),  a' ~ pi(.|s')
    J_Q   = 1/2 sum_j E[(Q_j(s, a) - y)^2]
    J_pi  = E[alpha log pi(a~|s) - min_j Q_j(s, a~)],                a~ ~ pi(.|s)
    J(alpha) = E[-alpha (log pi(a~|s) + H)],                         H = -|A|

`G` and `gamma^n` are the replay's n-step return and discount: the discount is 0
only after a termination, so a time-limit truncation bootstraps from `s'`.

References: Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and Applications"
(Algorithm 1; the temperature's loss is its eq. 18), with the twin critics' min
target of Fujimoto et al. 2018; the settings are rl-zoo's (`config.sac`).
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from pararl.algos.fused import FusedSteps, StepMode, program_boundary
from pararl.algos.offpolicy import ActorCriticState, check_box_actions
from pararl.config import Filled, SACConfig
from pararl.models import SquashedGaussianActor, TwinQ, squashed_actor
from pararl.models.acting import obs_tensor
from pararl.models.multi import MultiInputEncoder
from pararl.mp.threads import takes_every_core
from pararl.mp.topology import physical_cores
from pararl.observations import Leaf
from pararl.optim import FlatAdam, views_into
from pararl.replay.nstep import Transitions


class SACLearner:
    """Owns the actor, the twin critics, their target copies, the temperature and
    the three optimizers (capturable flat Adam), on one device. The gradient step
    (`_step`) runs as written, compiled or as a recorded CUDA graph (`step_mode`,
    `pararl.algos.fused`): the same math either way. The noise of its two action
    samples is drawn before the step, from the learner's own generator."""

    def __init__(
        self,
        actor: SquashedGaussianActor,
        critic: TwinQ,
        config: SACConfig,
        device: torch.device,
        step_mode: StepMode = "eager",
        noise_seed: int = 0,
    ) -> None:
        self.config, self.settings = config, config.settings
        self.device, self.step_mode = device, step_mode
        self.actor = actor.to(device)
        self.critic = critic.to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        capturable = step_mode != "eager"
        lr = self.settings.lr
        self.actor_optimizer = FlatAdam(self.actor.parameters(), lr=lr, capturable=capturable)
        self.critic_optimizer = FlatAdam(self.critic.parameters(), lr=lr, capturable=capturable)
        # the target critics in one vector too: their Polyak update is one op
        self.target_flat = self.critic_optimizer.flat.detach().clone()
        views_into(self.critic_target, self.target_flat)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(config.alpha), device=device))
        self.alpha_optimizer = FlatAdam([self.log_alpha], lr=lr, capturable=capturable)
        self.target_entropy = -float(actor.action_dim)  # H = -|A|
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(noise_seed)
        # one program per kind of batch: with and without importance weights
        self.steps: FusedSteps[bool] = FusedSteps(step_mode, device)
        self.updates = 0

    def seed_noise(self, seed: int) -> None:
        """Start the noise of the action samples on a new stream (a resumed run)."""
        self.generator.manual_seed(seed)

    def _tensor(self, array: Any) -> torch.Tensor:
        return torch.as_tensor(array, dtype=torch.float32).to(self.device, non_blocking=True)

    def _obs(self, obs: Any) -> Any:
        """Observations on the device: float32 vectors, or a Dict observation's leaves
        in their stored dtypes (the encoders convert them)."""
        return obs_tensor(obs, self.device) if isinstance(obs, dict) else self._tensor(obs)

    def update(
        self, batch: Transitions, weights: np.ndarray | None = None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One gradient step on a minibatch, each sample's critic loss weighted by
        `weights` (prioritized replay's importance weights) if given; returns the
        step's statistics and each sample's TD error (on the learner's device)."""
        shape = (2, len(batch), self.actor.action_dim)
        noise = torch.randn(shape, generator=self.generator, device=self.device)
        inputs = [
            self._obs(batch.obs),
            self._tensor(batch.action),
            self._tensor(batch.ret),
            self._obs(batch.next_obs),
            self._tensor(batch.discount),
            noise,
        ]
        if weights is not None:
            inputs.append(self._tensor(weights))
        step = self.steps.get(weights is not None, lambda: self._step)
        critic_loss, actor_loss, alpha_loss, alpha, q_mean, entropy, td_error = step(*inputs)
        self.updates += 1
        # tensors, not floats: converting would wait for the GPU on every update
        stats = {
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha_loss": alpha_loss,
            "alpha": alpha,
            "q_mean": q_mean,
            "entropy": entropy,
        }
        return stats, td_error

    @torch.no_grad()
    def soft_td_target(
        self,
        ret: torch.Tensor,
        next_obs: Any,
        discount: torch.Tensor,
        next_noise: torch.Tensor,
        alpha: torch.Tensor,
    ) -> torch.Tensor:
        """y = G + gamma^n (min_j Q'_j(s', a') - alpha log pi(a'|s')), a' ~ pi(.|s'):
        the target critics' min, less the entropy term; `discount` is 0 only after a
        termination (a truncated episode bootstraps from its last observation)."""
        next_action, next_log_pi = self.actor.sample(next_obs, next_noise)
        next_q = self.critic_target(next_obs, next_action).min(dim=0).values
        return ret + discount * (next_q - alpha * next_log_pi)

    def _step(
        self,
        obs: Any,
        action: torch.Tensor,
        ret: torch.Tensor,
        next_obs: Any,
        discount: torch.Tensor,
        noise: torch.Tensor,
        weights: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, ...]:
        """The four parts of one SAC update, in Algorithm 1's order; their statistics
        and each sample's TD error."""
        alpha = self.log_alpha.detach().exp()  # this update's temperature
        td_target = self.soft_td_target(ret, next_obs, discount, noise[0], alpha)

        # critic loss: half the squared TD error of each critic, summed over the two
        q = self.critic(obs, action)
        per_sample = 0.5 * ((q - td_target) ** 2).sum(dim=0)
        if weights is not None:  # importance sampling corrects prioritized draws
            per_sample = per_sample * weights
        critic_loss = per_sample.mean()
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        program_boundary()  # compiled: the critics, just changed in place, are read next

        # actor loss at reparameterised a~ ~ pi(.|s), valued by the updated critics' min
        pi_action, log_pi = self.actor.sample(obs, noise[1])
        min_q_pi = self.critic(obs, pi_action).min(dim=0).values
        actor_loss = (alpha * log_pi - min_q_pi).mean()
        self.actor_optimizer.zero_grad()
        # the actor's gradient only: the critics' own is not needed for this loss
        actor_loss.backward(inputs=self.actor_optimizer.params)
        self.actor_optimizer.step()

        # temperature loss (eq. 18): alpha rises while the entropy is below H
        alpha_loss = -(self.log_alpha.exp() * (log_pi.detach() + self.target_entropy)).mean()
        if self.config.autotune:
            self.alpha_optimizer.zero_grad()
            alpha_loss.backward()
            self.alpha_optimizer.step()

        # target critics: theta' <- tau theta + (1 - tau) theta'
        with torch.no_grad():
            self.target_flat.lerp_(self.critic_optimizer.flat, self.settings.tau)

        td_error = (td_target - q.detach()).abs().mean(dim=0)  # the critics' mean |error|
        entropy = -log_pi.detach().mean()
        return (
            critic_loss.detach(),
            actor_loss.detach(),
            alpha_loss.detach(),
            alpha,
            q.detach().mean(),
            entropy,
            td_error,
        )

    @property
    def alpha(self) -> float:
        """The temperature now (a host sync: for logs and tests)."""
        return float(self.log_alpha.detach().exp())

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().cpu().clone(),
            "actor_optimizer": self.actor_optimizer.state_dict(),
            "critic_optimizer": self.critic_optimizer.state_dict(),
            "alpha_optimizer": self.alpha_optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # load_state_dict copies into the parameters in place: the flat views stay
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_optimizer.load_state_dict(state["actor_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.alpha_optimizer.load_state_dict(state["alpha_optimizer"])
        self.updates = int(state["updates"])


def check_spaces(config: SACConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    """SAC's spaces: a 1-D Box of actions with finite bounds, vector observations or
    Dict and Tuple ones (the multi-input encoder reads them)."""
    check_box_actions("SAC", config.env, observation_space, action_space, structured=True)


COMPILE_PAYS_UPDATES = 100_000  # planned updates from which `--compile auto` compiles


def compile_pays(cfg: SACConfig, mode: str, device: torch.device) -> bool:
    """Whether `--compile auto` compiles SAC's step: when the run plans
    `COMPILE_PAYS_UPDATES` updates or more, and on the CPU only when its learner runs
    on more than one thread.
    - CPU, HalfCheetah's sizes (async, 2 cores, updates/s after the first 1,500): on
      two threads the compiled step ran 135.6 and 137.0 updates/s against 115.6 and
      115.8 as written (1.18x); on one thread it gained nothing (85.5 and 86.3
      against 87.5 and 98.8). A first compile costs ~30 s (~10 s from inductor's
      on-disk cache), which 1.18x repays after ~25k updates.
    - GPU (an H100, async, one actor process, 40k steps): compiled and recorded, the
      pipeline ran 1,939 updates/s against 1,383 recorded alone (1.40x); compiling
      delayed the first update by 12 s, which that repays after ~58k updates."""
    s = cfg.settings
    updates = (cfg.budget - s.learning_starts) * s.replay_ratio
    if updates < COMPILE_PAYS_UPDATES:
        return False
    if device.type == "cuda":
        return True
    wide = takes_every_core(mode, False, s.batch_size) and physical_cores() > 1
    return cfg.learner_threads > 1 or (cfg.learner_threads == 0 and wide)


class SACState(ActorCriticState[SACLearner]):
    """What a SAC run is made of, and how it is checkpointed: from a config filled
    in for the env's kind (`RunConfig.for_env`); its actors sample the squashed
    Gaussian after uniform first steps (`algos.offpolicy.UniformFirst`)."""

    ALGO = "sac"

    def __init__(
        self,
        filled: Filled[SACConfig],
        observation_space: gym.Space,
        action_space: gym.Space,
        device: torch.device,
        resume_state: dict[str, Any] | None = None,
        step_mode: StepMode = "eager",
    ) -> None:
        """`step_mode`: how the gradient step runs (`algos.fused`; the run decides,
        e.g. by `compile_pays`)."""
        cfg = filled.config
        check_spaces(cfg, observation_space, action_space)
        self.filled, self.config, self.settings = filled, cfg, cfg.settings
        obs_dim = self._spaces(observation_space, action_space)
        self.make_model = functools.partial(
            squashed_actor, obs_dim, self.action_dim, cfg.hidden, self.low, self.high, self.leaves
        )
        # Dict and Tuple observations: the critics read them through an encoder of
        # their own (the actor has its own), updated by the critics' loss alone
        encoder = MultiInputEncoder(self.leaves) if self.leaves else None
        critic = TwinQ(obs_dim, self.action_dim, cfg.hidden, encoder=encoder)
        self.learner = SACLearner(self.make_model(), critic, cfg, device, step_mode)
        self._memory(resume_state)


def load_policy(config: SACConfig, state: dict[str, Any]) -> SquashedGaussianActor:
    """The deterministic actor of a checkpoint (`pararl evaluate`): tanh of the mean,
    scaled to the env's bounds."""
    low = np.asarray(state["action_low"], np.float32)
    high = np.asarray(state["action_high"], np.float32)
    obs_dim = int(np.prod(state["obs_shape"]))
    leaves = tuple(Leaf.from_dict(d) for d in state.get("obs_leaves", ()))
    actor = squashed_actor(obs_dim, len(low), config.hidden, low, high, leaves)
    actor.load_state_dict(state["learner"]["actor"])
    return actor


__all__ = [
    "COMPILE_PAYS_UPDATES",
    "SACLearner",
    "SACState",
    "check_spaces",
    "compile_pays",
    "load_policy",
]
