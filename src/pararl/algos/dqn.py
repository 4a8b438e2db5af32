"""DQN: the learner (double-DQN targets on n-step returns, Huber loss, target
network), how its actors explore (epsilon-greedy; Ape-X's per-actor epsilons and
first priorities), and the run's state (networks, replay memory, counters,
checkpoint format).

An env that gives action masks (`envs.masks`) has its actors act among the legal
actions (the greedy one, and epsilon's uniform one), and the bootstrap target take
its max (double DQN: its argmax) over the next observation's legal actions, whose
mask each transition stores.

References: Mnih et al. 2015 (DQN), van Hasselt et al. 2016 (double DQN),
Hessel et al. 2018 (n-step returns in Rainbow).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import nn

from pararl import seeding
from pararl.algos.fused import FusedSteps, StepMode, resolve_step_mode
from pararl.algos.offpolicy import ReplayState
from pararl.config import DQNConfig, Filled
from pararl.envs.masks import mask_info, mask_size
from pararl.errors import UsageError
from pararl.images import check_model, is_multi_input
from pararl.models import QNetwork
from pararl.models.acting import Acted, Draws, Policy, State, obs_tensor
from pararl.models.build import q_network
from pararl.observations import Leaf, encoded, stored
from pararl.optim import FlatAdam, FlatRMSprop, RowAdam, RowRMSprop
from pararl.replay.make import make_replay
from pararl.replay.nstep import Transitions

RMSPROP = {"alpha": 0.95, "eps": 0.01}  # the Nature DQN's and MinAtar's centred RMSProp


def make_optimizer(q: torch.nn.Module, name: str, lr: float, capturable: bool = False) -> FlatAdam:
    """Adam, or centred RMSProp as the Nature DQN and MinAtar ran it (decay 0.95,
    eps 0.01 on the standard deviation of the gradient)."""
    if name == "rmsprop":
        return FlatRMSprop(q.parameters(), lr=lr, capturable=capturable, **RMSPROP)
    return FlatAdam(q.parameters(), lr=lr, capturable=capturable)


def make_row_optimizer(twin: torch.nn.Module, name: str, lr: float) -> RowAdam:
    """`make_optimizer` for a population's batched twin (`--seeds`): the same
    optimizer and settings, a row per agent (`optim.RowAdam`, `RowRMSprop`)."""
    if name == "rmsprop":
        return RowRMSprop(twin.parameters(), lr=lr, **RMSPROP)
    return RowAdam(twin.parameters(), lr=lr)


def stored_dtype(observation_space: gym.Space) -> np.dtype:
    """The dtype a DQN run learns from and stores its observations in: vector
    observations as float32, the others (uint8 frames, discrete values) as they come."""
    dtype = np.dtype(observation_space.dtype or np.float32)
    return np.dtype(np.float32) if dtype.kind == "f" else dtype


class DQNLearner:
    """Owns the online and target Q-networks and the optimizer, on one device. The
    gradient step (`_step`) runs as written, compiled or as a recorded CUDA graph
    (`step_mode`, `pararl.algos.fused`): the same math either way."""

    def __init__(
        self, q: QNetwork, config: DQNConfig, device: torch.device, step_mode: StepMode = "eager"
    ) -> None:
        self.config, self.settings = config, config.settings
        self.device = device
        self.q = q.to(device)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.step_mode = step_mode
        self.optimizer = make_optimizer(
            self.q, self.settings.optimizer, self.settings.lr, capturable=step_mode != "eager"
        )
        # one program per kind of batch: with and without importance weights, with
        # and without the next observations' action masks
        self.steps: FusedSteps[tuple[bool, bool]] = FusedSteps(step_mode, device)
        self.updates = 0

    def _tensor(self, array: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(array, dtype=dtype).to(self.device, non_blocking=True)

    def update(
        self, batch: Transitions, weights: np.ndarray | None = None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """One gradient step on a minibatch, each sample's loss weighted by
        `weights` (prioritized replay's importance weights) if given; returns loss
        and mean Q, and each sample's TD error (on the learner's device).
        Observations go to the device in their stored dtype (uint8 frames stay
        bytes until there)."""
        inputs = [
            obs_tensor(batch.obs, self.device),
            obs_tensor(batch.next_obs, self.device),
            self._tensor(batch.action, torch.int64),
            self._tensor(batch.ret, torch.float32),
            self._tensor(batch.discount, torch.float32),
        ]
        weighted, masked = weights is not None, batch.next_mask is not None
        if weights is not None:
            inputs.append(self._tensor(weights, torch.float32))
        if batch.next_mask is not None:
            inputs.append(self._tensor(batch.next_mask, torch.bool))
        step = self.steps.get(
            (weighted, masked),
            lambda: functools.partial(self._step, weighted=weighted, masked=masked),
        )
        loss, q_mean, td_error = step(*inputs)
        self.updates += 1
        self._update_target()
        # tensors, not floats: converting would wait for the GPU on every update
        return {"loss": loss, "q_mean": q_mean}, td_error

    def _step(
        self,
        obs: Any,
        next_obs: Any,
        actions: torch.Tensor,
        ret: torch.Tensor,
        discount: torch.Tensor,
        *extra: torch.Tensor,
        weighted: bool = False,
        masked: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The loss, its gradient and the optimizer's step; loss, mean Q and TD errors.
        `extra`: the importance weights when `weighted`, then the next observations'
        action masks when `masked`."""
        weights = extra[0] if weighted else None
        next_mask = extra[-1] if masked else None
        with torch.no_grad():
            next_q_target = self.q_target(next_obs)
            if self.settings.double_dqn:
                # the online net picks the next action, the target net values it
                next_q = self.q(next_obs)
                if next_mask is not None:  # among the legal next actions
                    next_q = next_q.masked_fill(~next_mask, -torch.inf)
                next_actions = next_q.argmax(dim=1, keepdim=True)
                next_value = next_q_target.gather(1, next_actions).squeeze(1)
            else:
                if next_mask is not None:  # the best legal next action's value
                    next_q_target = next_q_target.masked_fill(~next_mask, -torch.inf)
                next_value = next_q_target.max(dim=1).values
            # n-step TD target; discount is gamma**k, and 0 only after termination
            td_target = ret + discount * next_value

        q_taken = self.q(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        td_error = td_target - q_taken
        per_sample = F.smooth_l1_loss(q_taken, td_target, reduction="none")  # Huber
        if weights is not None:  # importance sampling corrects prioritized draws
            per_sample = per_sample * weights
        loss = per_sample.mean()

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.clip_grad_norm_(self.config.max_grad_norm)
        self.optimizer.step()
        return loss.detach(), q_taken.detach().mean(), td_error.detach()

    @torch.no_grad()
    def _update_target(self) -> None:
        cfg = self.config
        if cfg.tau < 1.0:  # Polyak averaging every update
            for p, p_target in zip(self.q.parameters(), self.q_target.parameters(), strict=True):
                p_target.lerp_(p, cfg.tau)
        elif self.updates % self.settings.target_update == 0:
            self.q_target.load_state_dict(self.q.state_dict())

    def state_dict(self) -> dict[str, Any]:
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


def check_spaces(config: DQNConfig, observation_space: gym.Space, action_space: gym.Space) -> None:
    if isinstance(action_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        kind = type(action_space).__name__
        raise UsageError(
            f"DQN takes Discrete actions; {config.env} has {action_space}. PPO takes "
            f"{kind} actions: pararl train ppo --env {config.env}"
        )
    if not isinstance(action_space, gym.spaces.Discrete):
        box = isinstance(action_space, gym.spaces.Box)
        raise UsageError(
            f"DQN takes Discrete actions; {config.env} has {action_space}"
            + (". SAC, TD3 and PPO take Box actions" if box else "")
        )
    if not isinstance(observation_space, gym.spaces.Box) and not is_multi_input(observation_space):
        raise UsageError(
            f"DQN here takes Box, Discrete, MultiDiscrete, Dict and Tuple observation spaces; "
            f"{config.env} has {observation_space}; wrap it into one of them"
        )
    check_model(config.model, config.env_name, observation_space)
    encoded(observation_space)  # a leaf the encoder cannot read is refused now


@dataclass(frozen=True)
class EpsilonSchedule:
    """Linear from `start` to `end` over `decay_steps` env steps of the whole run;
    or a constant `fixed` epsilon (an Ape-X actor's own)."""

    start: float
    end: float
    decay_steps: int
    fixed: float | None = None

    def __call__(self, env_steps: int) -> float:
        if self.fixed is not None:
            return self.fixed
        frac = min(1.0, env_steps / self.decay_steps)
        return self.start + frac * (self.end - self.start)

    def for_actor(self, index: int, num_actors: int) -> EpsilonSchedule:
        """Ape-X's per-actor constant: eps_i = 0.4 ** (1 + 7 i / (N - 1))
        (Horgan et al. 2018)."""
        eps = 0.4 ** (1 + 7 * index / max(1, num_actors - 1))
        return EpsilonSchedule(self.start, self.end, self.decay_steps, eps)


@torch.no_grad()
def initial_priorities(
    q: nn.Module,
    obs: Any,
    action: np.ndarray,
    ret: np.ndarray,
    next_obs: Any,
    discount: np.ndarray,
    next_mask: np.ndarray | None = None,
) -> np.ndarray:
    """Ape-X's actor-side priorities: each transition's n-step TD error under the
    actor's own Q copy, |G + gamma^n max_a Q(s', a) - Q(s, a)| (the max over the
    legal a given `next_mask`)."""
    if len(action) == 0:
        return np.zeros(0, np.float32)
    q_obs = q(obs_tensor(obs)).gather(1, torch.as_tensor(action).view(-1, 1)).squeeze(1)
    next_q = q(obs_tensor(next_obs))
    if next_mask is not None:
        next_q = next_q.masked_fill(~torch.as_tensor(next_mask), -torch.inf)
    next_value = next_q.max(dim=1).values
    target = (
        torch.as_tensor(ret, dtype=torch.float32)
        + torch.as_tensor(discount, dtype=torch.float32) * next_value
    )
    return (target - q_obs).abs().numpy().astype(np.float32)


@dataclass(frozen=True)
class EpsilonGreedy:
    """DQN's acting: epsilon-greedy on a Q-network copy; `apex`: also the first
    priorities of its transitions."""

    make_q: Callable[[], QNetwork]  # the run's Q-network constructor (picklable)
    schedule: EpsilonSchedule  # of the run's env steps
    apex: bool = False

    @property
    def action_shape(self) -> tuple[int, ...]:
        return ()

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.int64)

    @property
    def priorities(self) -> Callable[..., np.ndarray] | None:
        return initial_priorities if self.apex else None

    def make_net(self) -> nn.Module:
        return self.make_q()

    def act(
        self,
        net: nn.Module,
        obs: Any,
        state: State,
        first: np.ndarray,
        env_steps: int,
        rng: np.random.Generator,
        mask: np.ndarray | None = None,
    ) -> Acted:
        q = cast(Policy, net)  # a `make_net` network; not checked at every step
        draws = Draws(rng, epsilon=self.schedule(env_steps))
        return q.act(obs, state, first, "sampled", draws, mask)


class DQNState(ReplayState[DQNLearner]):
    """What a DQN run is made of, and how it is checkpointed: from a config filled
    in for the env's kind (`RunConfig.for_env`). `rank` names the replica's
    replay-sampling stream (parameter averaging; 0 otherwise);
    `frame_stack` > 0: observations are stacks of that many `uint8` frames, stored
    frame by frame (`replay.frame_steps.stack_size` of the env); `action_masks`: the
    env gives masks (`envs.masks`), each transition stores its next one. Dict and
    Tuple observations are read by the multi-input encoder and stored leaf by leaf."""

    ALGO = "dqn"

    def __init__(
        self,
        filled: Filled[DQNConfig],
        observation_space: gym.Space,
        action_space: gym.Space,
        device: torch.device,
        resume_state: dict[str, Any] | None = None,
        rank: int = 0,
        frame_stack: int = 0,
        action_masks: bool = False,
    ) -> None:
        cfg = filled.config
        check_spaces(cfg, observation_space, action_space)
        assert isinstance(action_space, gym.spaces.Discrete)
        if action_masks and frame_stack:
            raise UsageError(
                f"{cfg.env} gives action masks, which DQN here keeps with vector "
                "observations, not stacked frames; PPO takes masks with images: pararl "
                f"train ppo --env {cfg.env}"
            )
        self.mask_size = mask_size(action_space) if action_masks else 0
        self.mask_info = mask_info(action_space) if action_masks else None
        self.filled, self.config, self.settings = filled, cfg, cfg.settings
        self.obs_shape = tuple(observation_space.shape or ())
        self.obs_dtype = stored_dtype(observation_space)
        # what the multi-input encoder reads (Dict and Tuple observations: their leaves,
        # each stored as its own array; a bare discrete one: one leaf, one array)
        self.leaves = encoded(observation_space)
        self.num_actions = int(action_space.n)
        self.make_model = functools.partial(
            q_network,
            self.settings.model,
            self.obs_shape,
            self.obs_dtype,
            self.num_actions,
            cfg.hidden,
            cfg.dueling,
            self.leaves,
        )
        self.learner = DQNLearner(
            self.make_model(), cfg, device, resolve_step_mode(cfg.compile, device)
        )
        self.frame_stack = frame_stack
        self.replay = make_replay(
            self.settings.buffer_size,
            self.obs_shape,
            self.obs_dtype,
            frame_stack,
            cfg.prioritized,
            cfg.priority_alpha,
            mask_size=self.mask_size,
            leaves=stored(self.leaves),
        )
        if resume_state is not None:
            self.load(resume_state)
        self.replay_rng = seeding.generator(cfg.seed, "replay", rank, self.env_steps)

    @property
    def acting_net(self) -> QNetwork:
        """The network actors act with and evaluations run: the online Q-network."""
        return self.learner.q

    def epsilon(self) -> EpsilonSchedule:
        """The run's epsilon schedule (of its env steps)."""
        return EpsilonSchedule(
            self.config.eps_start, self.settings.eps_end, self.settings.eps_decay_steps
        )

    def acting_policy(
        self, index: int = 0, num_actors: int = 1, apex: bool = False
    ) -> EpsilonGreedy:
        """How actor `index` of `num_actors` acts: epsilon-greedy on its Q copy; `apex`:
        Ape-X (its own epsilon, and initial priorities computed with its Q copy)."""
        schedule = self.epsilon()
        if self.config.apex_eps or apex:
            schedule = schedule.for_actor(index, num_actors)
        return EpsilonGreedy(self.make_model, schedule, apex)

    def acting_stats(self) -> dict[str, float]:
        """The exploration now, for the log: the schedule's epsilon."""
        return {"epsilon": self.epsilon()(self.env_steps)}

    def described(self) -> dict[str, Any]:
        return {
            "obs_shape": self.obs_shape,
            "obs_dtype": self.obs_dtype.str,
            "obs_leaves": [leaf.as_dict() for leaf in self.leaves],
            "num_actions": self.num_actions,
            "action_masks": self.mask_size > 0,
        }


def load_policy(config: DQNConfig, state: dict[str, Any]) -> QNetwork:
    """The greedy Q-network of a checkpoint (`pararl evaluate`), of the run's model
    (runs saved before `--model` existed are MLPs)."""
    model = "mlp" if config.model == "auto" else config.model
    dtype = np.dtype(state.get("obs_dtype", "<f4"))
    q = q_network(
        model,
        tuple(state["obs_shape"]),
        dtype,
        state["num_actions"],
        config.hidden,
        config.dueling,
        tuple(Leaf.from_dict(d) for d in state.get("obs_leaves", ())),
    )
    q.load_state_dict(state["learner"]["q"])
    return q
