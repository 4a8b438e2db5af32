"""What the off-policy learners (DQN, SAC, TD3) share between their replay memory and
their gradient step: when a batch may be learned from, how many updates the replay
ratio allows, and one update on a batch drawn uniformly or in proportion to
priority (importance-weighted, its priorities then set to its new TD errors); and
`ReplayState`, the part of every off-policy run's state these make up, with
`ActorCriticState` and `UniformFirst` for those that act with an actor on a Box of
actions (SAC, TD3)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, cast

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from pararl import seeding
from pararl.checkpoint import Header
from pararl.errors import UsageError
from pararl.images import is_image, is_multi_input
from pararl.models.acting import Acted, Draws, Policy, State, no_mask
from pararl.observations import Leaf, batch_size, encoded, is_discrete, stored
from pararl.replay.make import Replay, make_replay
from pararl.replay.nstep import Transitions
from pararl.replay.prioritized import PrioritizedReplay


def can_learn(replay: Replay, batch_size: int, learning_starts: int) -> bool:
    """A batch is there, and `learning_starts` transitions went into this memory
    (counted as added, not as held: a frame memory as large as `learning_starts`,
    rl-zoo's Atari setting, never holds that many, its episode ends taking slots)."""
    return len(replay) >= batch_size and replay.added >= learning_starts


def updates_due(
    replay_ratio: float, learning_starts: int, env_steps: int, updates: int, ready: bool
) -> int:
    """Gradient updates the replay ratio allows now, beyond the `updates` done; the
    ratio counts env steps after `learning_starts`. Ratio 0 (async only): one at a
    time, always (the learner learns all the time)."""
    if not ready:
        return 0
    if replay_ratio == 0:
        return 1
    allowed = int(replay_ratio * (env_steps - learning_starts))
    return max(0, allowed - updates)


def importance_beta(start: float, env_steps: int, budget: int) -> float:
    """Prioritized replay's importance-sampling exponent: `start` annealed linearly
    to 1 over the step budget."""
    frac = min(1.0, env_steps / budget)
    return start + frac * (1.0 - start)


class Learner(Protocol):
    """An off-policy learner: one gradient step on a batch, and its counters."""

    updates: int
    device: torch.device

    def update(
        self, batch: Transitions, weights: np.ndarray | None
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """(the step's statistics, each sample's TD error)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


L = TypeVar("L", bound=Learner)


class ReplayState(Generic[L]):
    """The replay half of an off-policy run's state: its memory and the stream its
    batches are drawn from, the env steps and wall time so far, and the update the
    replay ratio schedules. A subclass sets these attributes and its `learner`
    (`Learner`), and names its checkpoint (`ALGO`)."""

    ALGO = ""  # the checkpoint header's algorithm name
    config: Any  # RunConfig with the replay fields (priority_beta, prioritized, ...)
    settings: Any  # the kind-dependent fields (batch_size, learning_starts, replay_ratio)
    learner: L
    replay: Replay
    replay_rng: np.random.Generator
    env_steps: int = 0
    wall_s: float = 0.0
    # env steps the replay ratio does not count: those a resumed run spent refilling a
    # memory its checkpoint did not hold (`_rebase`), saved with the run
    ratio_offset: int = 0
    _rebase_pending: bool = False  # resumed without a memory: rebase once it is ready
    mask_size: int = 0  # > 0: the env gives action masks (DQN), stored with transitions
    mask_info: dict[str, np.ndarray] | None = None  # the vector envs' `shared_infos` then

    def can_learn(self) -> bool:
        """A batch is there, and `learning_starts` transitions went into this memory."""
        s = self.settings
        return can_learn(self.replay, s.batch_size, s.learning_starts)

    def updates_due(self) -> int:
        """Gradient updates the replay ratio allows now, beyond those done."""
        s = self.settings
        ready = self.can_learn()
        if ready and self._rebase_pending:
            self._rebase()
        return updates_due(
            s.replay_ratio,
            s.learning_starts,
            self.env_steps - self.ratio_offset,
            self.learner.updates,
            ready,
        )

    def _rebase(self) -> None:
        """A run resumed without its replay memory (from `latest` or `step_N`) has
        refilled `learning_starts` transitions: the ratio goes on from here, as if
        those steps had not been taken. Counted, they would let the learner make
        ratio x learning_starts updates at once on the small new memory (Atari DQN:
        25,000 on 100,000 transitions) before it took in another step."""
        self._rebase_pending = False
        ratio = self.settings.replay_ratio
        if ratio > 0:
            counted = self.learner.updates / ratio  # the steps its updates stand for
            behind = self.env_steps - self.settings.learning_starts - self.ratio_offset
            self.ratio_offset += max(0, int(behind - counted))

    def beta(self) -> float:
        """Importance-sampling exponent: `priority_beta` annealed to 1 over the budget."""
        return importance_beta(self.config.priority_beta, self.env_steps, self.config.budget)

    def update(self) -> dict[str, torch.Tensor]:
        """One gradient update on a replay batch: uniform, or prioritized (weighted by
        importance, and the batch's priorities set to its new TD errors)."""
        size = self.settings.batch_size
        if not isinstance(self.replay, PrioritizedReplay):
            stats, _ = self.learner.update(self.replay.sample(size, self.replay_rng), None)
            return stats
        sample = self.replay.sample_prioritized(size, self.replay_rng, self.beta())
        stats, td_error = self.learner.update(sample.batch, sample.weights)
        self.replay.update_priorities(sample.slots, td_error.cpu().numpy())
        return stats

    def described(self) -> dict[str, Any]:
        """What a checkpoint says of the networks beyond their weights (shapes,
        bounds), for loading its policy alone."""
        return {}

    def state(self, with_replay: bool = True, wall_s: float = 0.0) -> dict[str, Any]:
        """The checkpoint: header, learner, replay memory (or None), description."""
        return {
            **Header(self.ALGO, 1, self.env_steps, wall_s).as_dict(),
            "learner": self.learner.state_dict(),
            "replay": self.replay.state_dict() if with_replay else None,
            "ratio_offset": self.ratio_offset,
            **self.described(),
        }

    def load(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        if state.get("replay") is not None:
            self.replay.load_state_dict(state["replay"])
        header = Header.of(state)
        self.env_steps, self.wall_s = header.env_steps, header.wall_s
        self.ratio_offset = int(state.get("ratio_offset", 0))
        self._rebase_pending = state.get("replay") is None and self.learner.updates > 0


def check_box_actions(
    algo: str,
    env: str,
    observation_space: gym.Space,
    action_space: gym.Space,
    structured: bool = False,
) -> None:
    """The spaces an actor-critic learner here takes (SAC, TD3): a 1-D Box of actions
    with finite bounds, vector observations (and, when `structured`, those the
    multi-input encoder reads: Dict, Tuple, Discrete and MultiDiscrete ones); else a
    one-line UsageError."""
    if not isinstance(action_space, gym.spaces.Box):
        raise UsageError(
            f"{algo} needs a continuous (Box) action space; {env} has {action_space}"
            + who_takes(action_space, env)
        )
    if len(action_space.shape) != 1:
        raise UsageError(
            f"{algo} here takes a 1-D Box of actions; {env} has shape "
            f"{action_space.shape}; wrap it so that it steps with a flat vector of actions"
        )
    if not (np.isfinite(action_space.low).all() and np.isfinite(action_space.high).all()):
        raise UsageError(
            f"{algo} keeps its actions within the env's bounds, and {env}'s are not finite "
            f"({action_space}); wrap it with gymnasium.wrappers.RescaleAction"
        )
    if is_multi_input(observation_space):
        if not structured:
            raise UsageError(
                f"{algo} here learns from Box observations; {env} gives "
                f"{type(observation_space).__name__} observations, which SAC and PPO take "
                "(and DQN, for discrete actions)"
            )
        encoded(observation_space)  # a leaf the encoder cannot read is refused now
        return
    if not isinstance(observation_space, gym.spaces.Box) or is_image(observation_space):
        raise UsageError(
            f"{algo} here learns from vector observations (MLPs); {env} has "
            f"{observation_space}. Train PPO for image observations."
        )


def who_takes(action_space: gym.Space, env: str) -> str:
    """Which algorithms take these actions instead (only those that do), as the tail
    of a refusal ("" for a Box, which the refusing algorithm names itself)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return f". DQN and PPO take Discrete actions: pararl train dqn --env {env}"
    if isinstance(action_space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        kind = type(action_space).__name__
        return f". PPO takes {kind} actions: pararl train ppo --env {env}"
    return ""


class ActorLearner(Learner, Protocol):
    """A learner whose acting network is an actor, and which draws noise of its own."""

    actor: nn.Module

    def seed_noise(self, seed: int) -> None: ...


A = TypeVar("A", bound=ActorLearner)


class ActorCriticState(ReplayState[A]):
    """The run state of an off-policy learner that acts with an actor on a 1-D Box of
    actions from vector observations, or Dict and Tuple ones read by a multi-input
    encoder (SAC, TD3): the spaces (`_spaces`), the replay memory of action vectors
    and the streams of batches and noise (`_memory`), which a resumed run draws from
    anew, and the acting (`UniformFirst`)."""

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    frame_stack: int
    leaves: tuple[Leaf, ...]
    action_dim: int
    low: np.ndarray
    high: np.ndarray
    make_model: Callable[[], nn.Module]

    def _spaces(self, observation_space: gym.Space, action_space: gym.Space) -> int:
        """Read the spaces; the observation size (the networks' input; 0 for Dict and
        Tuple observations, whose `leaves` an encoder reads; a bare discrete
        observation is one leaf too, stored as one array)."""
        assert isinstance(action_space, gym.spaces.Box)
        self.obs_shape = tuple(observation_space.shape or ())
        # vectors learned from as float32, stored so; discrete values as they come
        discrete = is_discrete(observation_space)
        self.obs_dtype = np.dtype(observation_space.dtype if discrete else np.float32)
        self.frame_stack = 0  # no frame stacks: vector observations, or leaves
        self.leaves = encoded(observation_space)
        self.action_dim = int(action_space.shape[0])
        self.low = action_space.low.astype(np.float32)
        self.high = action_space.high.astype(np.float32)
        return int(np.prod(self.obs_shape))

    def _memory(self, resume_state: dict[str, Any] | None) -> None:
        """The replay memory, the resumed state if any, and the streams of batches and
        of the learner's noise (new ones for a resumed run)."""
        cfg, s = self.config, self.settings
        self.replay = make_replay(
            s.buffer_size,
            self.obs_shape,
            self.obs_dtype,
            0,
            cfg.prioritized,
            cfg.priority_alpha,
            (self.action_dim,),
            np.float32,
            leaves=stored(self.leaves),
        )
        if resume_state is not None:
            self.load(resume_state)
        self.replay_rng = seeding.generator(cfg.seed, "replay", 0, self.env_steps)
        self.learner.seed_noise(seeding.integer(cfg.seed, "noise", 0, self.env_steps))

    @property
    def acting_net(self) -> nn.Module:
        """The network actors act with and evaluations run: the actor."""
        return self.learner.actor

    def acting_policy(
        self, index: int = 0, num_actors: int = 1, apex: bool = False
    ) -> UniformFirst:
        """How every actor acts (`apex` has no meaning here)."""
        del index, num_actors, apex
        return UniformFirst(self.make_model, self.action_dim, self.settings.learning_starts)

    def acting_stats(self) -> dict[str, float]:
        return {}

    def described(self) -> dict[str, Any]:
        return {
            "obs_shape": self.obs_shape,
            "obs_leaves": [leaf.as_dict() for leaf in self.leaves],
            "action_low": self.low.tolist(),
            "action_high": self.high.tolist(),
        }


class Uniform(Policy, Protocol):
    """An actor that can also act uniformly within its bounds."""

    def uniform(self, count: int, rng: np.random.Generator) -> np.ndarray: ...


@dataclass(frozen=True)
class UniformFirst:
    """An actor's acting (`samplers.chunks.explore.ActingPolicy`): uniform random
    actions within the bounds while the run has taken fewer than `random_steps` env
    steps (the learner's `learning_starts`, as SB3 does), then the actor copy's
    sampled action (SAC's squashed Gaussian, TD3's action plus noise), drawn from the
    actor's own stream."""

    make_actor: Callable[[], nn.Module]  # the run's actor constructor (picklable)
    action_dim: int
    random_steps: int

    @property
    def action_shape(self) -> tuple[int, ...]:
        return (self.action_dim,)

    @property
    def action_dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def priorities(self) -> None:
        return None  # new transitions get the memory's largest priority

    def make_net(self) -> nn.Module:
        return self.make_actor()

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
        no_mask(mask, "an actor of continuous actions")
        actor = cast(Uniform, net)  # a `make_net` network; not checked at every step
        if env_steps < self.random_steps:  # the state is left as it was
            return Acted(actor.uniform(batch_size(obs), rng), state)
        return actor.act(obs, state, first, "sampled", Draws(rng))


__all__ = [
    "ActorCriticState",
    "Learner",
    "ReplayState",
    "UniformFirst",
    "can_learn",
    "check_box_actions",
    "importance_beta",
    "updates_due",
    "who_takes",
]
