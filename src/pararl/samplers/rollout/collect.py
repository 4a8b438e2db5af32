"""On-policy rollouts for PPO: storage [T, B] filled step by step, finished into a
flat batch with GAE advantages and returns; `collect` fills one from a vector env
in SAME_STEP autoreset mode, all envs in lock-step.

The rollout holds raw observations (the policy normalises them itself, with
statistics frozen for the rollout: `pararl.models.normalize`), the rewards as learned from
(scaled when reward scaling is on), and each step's discounted return per env, from
which the learner updates the reward scale after the update.

Envs run in SAME_STEP autoreset mode, so every step is a real transition and a
truncated episode's true last observation (`final_obs`) is there to bootstrap from.

Actions are stored as the action head lays them out (`models.heads`: an index, or a
vector of indices, bits or floats per step). An env that gives action masks
(`envs.masks`) has each step's mask stored beside its observation: the policy acted
with it, and the loss evaluates the same masked policy.

Dict and Tuple observations are stored one array per leaf (`[T, B, *leaf.shape]`
under the leaf's name, `pararl.observations`), filled from the vector env's batch of
each leaf, and flattened leaf by leaf into the batch's "obs".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl.envs.masks import batch_mask
from pararl.gae import gae
from pararl.models import ActorCritic
from pararl.models.acting import Draws, Observations, State, obs_tensor
from pararl.models.normalize import DiscountedReturns
from pararl.observations import Leaf, batch_size, map_leaves, put, stacked, zeros

FLOAT32 = np.dtype(np.float32)


@dataclass(frozen=True)
class RolloutSpec:
    """The shapes and discounting of one rollout."""

    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]  # one action's (`ActionHead.action_shape`)
    action_dtype: np.dtype
    num_steps: int  # steps per env
    gamma: float
    gae_lambda: float
    obs_dtype: np.dtype = FLOAT32  # images: their own (uint8, bool)
    mask_size: int = 0  # > 0: the env gives action masks of this size
    leaves: tuple[Leaf, ...] = ()  # Dict and Tuple observations: one array per leaf


def advantages_and_returns(
    rewards: np.ndarray,
    values: np.ndarray,
    last_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    final_values: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE advantages (`pararl.gae`) and returns for a rollout shaped [T, B].

    `values[t]` is V(obs_t); `last_values` is V(obs_T) after the last step. An
    episode that ends at step t cuts the trace there: after termination the next
    value is 0; after truncation it is `final_values[t]`, the value of the true
    last observation (the env was reset, so obs_{t+1} is not its successor).
    """
    ends = terminated | truncated
    following = np.concatenate([values[1:], last_values[None]])
    # the value to bootstrap from: the next state's, the truncated state's, or 0
    next_values = np.where(ends, np.where(truncated, final_values, 0.0), following)
    advantages = gae(rewards, values, next_values, ends, gamma, lam)
    return advantages, advantages + values


@dataclass
class EnvStream:
    """Where a sampler's envs are between rollouts: the observations to act on next,
    each env's running discounted return, where an episode starts with those
    observations (`first`), what the policy carries between steps (`state`; None for
    a feed-forward policy), and the observations' action masks (None: no masks)."""

    obs: Observations
    returns: DiscountedReturns
    first: np.ndarray
    state: State = None
    mask: np.ndarray | None = None

    @classmethod
    def start(
        cls, obs: Observations, gamma: float, state: State = None, mask: np.ndarray | None = None
    ) -> EnvStream:
        """From the envs' reset: its observations (an array, or Dict and Tuple
        observations' leaves) and (`mask`) their action masks."""
        n = batch_size(obs)
        return cls(obs, DiscountedReturns(n, gamma), np.ones(n, bool), state, mask)

    def stepped(self, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """The envs took a step: those whose episode ended start anew (SAME_STEP)."""
        self.first = terminated | truncated


class Rollout:
    """Rollout storage [T, B] for one update, filled step by step, finished into a flat
    batch with advantages and returns."""

    def __init__(
        self, actor: ActorCritic, spec: RolloutSpec, n: int, returns: DiscountedReturns
    ) -> None:
        steps = spec.num_steps
        self.actor, self.spec, self.returns = actor, spec, returns
        self.ids = np.arange(n)
        self.device = next(actor.parameters()).device
        self.obs: np.ndarray | dict[str, np.ndarray] = (
            zeros(spec.leaves, (steps, n))
            if spec.leaves
            else np.zeros((steps, n, *spec.obs_shape), spec.obs_dtype)
        )
        self.actions = np.zeros((steps, n, *spec.action_shape), spec.action_dtype)
        self.masks = np.ones((steps, n, spec.mask_size), bool) if spec.mask_size else None
        self.logprobs = np.zeros((steps, n), np.float32)
        self.values = np.zeros((steps, n))
        self.rewards = np.zeros((steps, n))
        self.discounted = np.zeros((steps, n))
        self.final_values = np.zeros((steps, n))
        self.terminated = np.zeros((steps, n), bool)
        self.truncated = np.zeros((steps, n), bool)
        self.draws = Draws()  # torch's global stream (seeded per process)

    def act(
        self, t: int, obs: Observations, stream: EnvStream, mask: np.ndarray | None = None
    ) -> np.ndarray:
        """Sample actions for every env at step `t` with the acting copy (through its
        one acting call, carrying `stream`'s state; within `mask`, the observations'
        action masks); store them."""
        if self.masks is not None:
            if mask is None:
                raise RuntimeError("the env gave no action mask with this observation")
            self.masks[t] = mask
        acted = self.actor.act(obs, stream.state, stream.first, "sampled", self.draws, mask)
        assert acted.logprob is not None
        assert acted.value is not None
        stream.state = acted.state
        put(self.obs, t, obs)
        self.actions[t] = acted.action
        self.logprobs[t], self.values[t] = acted.logprob, acted.value
        return self.actions[t]

    @torch.no_grad()
    def record(
        self,
        t: int,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        final_obs: list[Any],
    ) -> None:
        """Store the step's outcome; `final_obs` holds the truncated envs' last
        observations, in order, to bootstrap from."""
        self.discounted[t] = self.returns.step(self.ids, rewards, terminated | truncated)
        self.rewards[t] = self.actor.norm.scale_rewards(rewards)
        self.terminated[t], self.truncated[t] = terminated, truncated
        if final_obs:
            batch = stacked(final_obs) if self.spec.leaves else np.stack(final_obs)
            final = obs_tensor(batch, self.device)
            self.final_values[t, truncated] = self.actor.value(final).cpu().numpy()

    @torch.no_grad()
    def finish(self, last_obs: Observations) -> dict[str, Any]:
        spec = self.spec
        last_values = self.actor.value(obs_tensor(last_obs, self.device))
        adv, ret = advantages_and_returns(
            self.rewards,
            self.values,
            last_values.cpu().numpy(),
            self.terminated,
            self.truncated,
            self.final_values,
            spec.gamma,
            spec.gae_lambda,
        )
        steps, n = self.rewards.shape
        batch: dict[str, Any] = {
            "obs": map_leaves(lambda v: v.reshape(steps * n, *v.shape[2:]), self.obs),
            "actions": self.actions,
            "logprobs": self.logprobs,
            "values": self.values.astype(np.float32),
            "advantages": adv.astype(np.float32),
            "returns": ret.astype(np.float32),
            "discounted": self.discounted,  # for the reward scale, not the loss
        }
        if self.masks is not None:
            batch["masks"] = self.masks
        return {
            k: v if k == "obs" else v.reshape(steps * n, *v.shape[2:]) for k, v in batch.items()
        }


def _truncated_final_obs(infos: dict[str, Any], truncated: np.ndarray) -> list[Any]:
    if not truncated.any():
        return []
    return list(infos["final_obs"][truncated])


EpisodeSink = Callable[[dict[str, Any]], None]  # takes the infos of finished episodes


def collect(
    actor: ActorCritic,
    spec: RolloutSpec,
    envs: gym.vector.VectorEnv,
    stream: EnvStream,
    episodes: EpisodeSink,
) -> dict[str, Any]:
    """One rollout of `spec.num_steps` vector steps acted by `actor` from `stream`
    (moved on to where the envs are after it); returns the flattened batch for the
    update (advantages and returns included)."""
    rollout, obs = Rollout(actor, spec, envs.num_envs, stream.returns), stream.obs
    mask = stream.mask
    for t in range(spec.num_steps):
        actions = rollout.act(t, obs, stream, mask)
        obs, reward, terminated, truncated, infos = envs.step(actions)
        mask = batch_mask(infos)  # the new observations' (after a reset: the reset's)
        stream.stepped(terminated, truncated)
        rollout.record(t, reward, terminated, truncated, _truncated_final_obs(infos, truncated))
        episodes(infos.get("final_info", {}))
    stream.obs, stream.mask = obs, mask
    return rollout.finish(obs)


__all__ = [
    "EnvStream",
    "EpisodeSink",
    "Rollout",
    "RolloutSpec",
    "advantages_and_returns",
    "collect",
]
