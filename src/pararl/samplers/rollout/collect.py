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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from pararl import seeding
from pararl.envs.masks import batch_mask
from pararl.gae import gae
from pararl.models import ActorCritic
from pararl.models.acting import Draws, Observations, State, obs_tensor
from pararl.models.normalize import DiscountedReturns
from pararl.mp.shared import ArraySpec, local_arrays
from pararl.observations import Leaf, batch_size, map_leaves, put, stacked

FLOAT32 = np.dtype(np.float32)
# a discount (gamma, GAE's lambda): one for every env, or each env's own (`[B]`: a
# population sweeping it, `runners.ppo_population`)
Discount = float | np.ndarray


@dataclass(frozen=True)
class RolloutSpec:
    """The shapes and discounting of one rollout."""

    obs_shape: tuple[int, ...]
    action_shape: tuple[int, ...]  # one action's (`ActionHead.action_shape`)
    action_dtype: np.dtype
    num_steps: int  # steps per env
    gamma: Discount
    gae_lambda: Discount
    obs_dtype: np.dtype = FLOAT32  # images: their own (uint8, bool)
    mask_size: int = 0  # > 0: the env gives action masks of this size
    leaves: tuple[Leaf, ...] = ()  # Dict and Tuple observations: one array per leaf
    # a recurrent policy's state per env, (S, H) (`models.recurrent`): each step's
    # `first` and every env's state at the rollout's start are stored, to replay
    core_shape: tuple[int, ...] = ()


def advantages_and_returns(
    rewards: np.ndarray,
    values: np.ndarray,
    last_values: np.ndarray,
    terminated: np.ndarray,
    truncated: np.ndarray,
    final_values: np.ndarray,
    gamma: Discount,
    lam: Discount,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE advantages (`pararl.gae`) and returns for a rollout shaped [T, B].

    `values[t]` is V(obs_t); `last_values` is V(obs_T) after the last step. An
    episode that ends at step t cuts the trace there: after termination the next
    value is 0; after truncation it is `final_values[t]`, the value of the true
    last observation (the env was reset, so obs_{t+1} is not its successor); a step
    both terminated and truncated is terminated.
    """
    ends = terminated | truncated
    following = np.concatenate([values[1:], last_values[None]])
    # the value to bootstrap from: the next state's, the truncated state's, or 0
    next_values = np.where(ends, np.where(truncated & ~terminated, final_values, 0.0), following)
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
        cls, obs: Observations, gamma: Discount, state: State = None, mask: np.ndarray | None = None
    ) -> EnvStream:
        """From the envs' reset: its observations (an array, or Dict and Tuple
        observations' leaves) and (`mask`) their action masks."""
        n = batch_size(obs)
        return cls(obs, DiscountedReturns(n, gamma), np.ones(n, bool), state, mask)

    def stepped(self, terminated: np.ndarray, truncated: np.ndarray) -> None:
        """The envs took a step: those whose episode ended start anew (SAME_STEP)."""
        self.first = terminated | truncated


def rollout_specs(spec: RolloutSpec, n: int) -> dict[str, ArraySpec]:
    """The arrays of one rollout of `n` envs (`Rollout`'s storage: one segment of an
    asynchronous actor's outbox, `samplers.rollout.actors`): [T, n] per step, and the
    observations after the last step with their values (`last_obs`, `last_values`)."""
    t, f32, f64, flag = spec.num_steps, FLOAT32, np.dtype(np.float64), np.dtype(np.bool_)
    specs: dict[str, ArraySpec] = {}
    for name, lead in (("obs", (t, n)), ("last_obs", (n,))):
        if spec.leaves:  # Dict and Tuple observations: an array per leaf
            for leaf in spec.leaves:
                specs[f"{name}.{leaf.name}"] = ArraySpec((*lead, *leaf.shape), leaf.dtype)
        else:
            specs[name] = ArraySpec((*lead, *spec.obs_shape), spec.obs_dtype)
    specs["actions"] = ArraySpec((t, n, *spec.action_shape), spec.action_dtype)
    if spec.mask_size:
        specs["masks"] = ArraySpec((t, n, spec.mask_size), flag)
    specs |= {
        "logprobs": ArraySpec((t, n), f32),
        "values": ArraySpec((t, n), f64),
        "rewards": ArraySpec((t, n), f64),
        "discounted": ArraySpec((t, n), f64),
        "final_values": ArraySpec((t, n), f64),
        "terminated": ArraySpec((t, n), flag),
        "truncated": ArraySpec((t, n), flag),
        "last_values": ArraySpec((n,), f32),
    }
    if spec.core_shape:
        specs["first"] = ArraySpec((t, n), flag)
        specs["start_state"] = ArraySpec((n, *spec.core_shape), f32)
    return specs


def per_env(key: str) -> bool:
    """Whether a rollout's array `key` is one row per env (not [T, n] per step)."""
    return key.startswith("last_") or key == "start_state"


def _observations(arrays: Mapping[str, np.ndarray], name: str) -> Any:
    """The array `name`, or the dict of its leaves (`name.leaf`)."""
    if name in arrays:
        return arrays[name]
    prefix = name + "."
    return {k.removeprefix(prefix): v for k, v in arrays.items() if k.startswith(prefix)}


class Rollout:
    """Rollout storage [T, B] for one update, filled step by step, finished into a flat
    batch with advantages and returns. `arrays`: where to store it (an outbox slot's
    views, laid out by `rollout_specs`); None: arrays of its own."""

    def __init__(
        self,
        actor: ActorCritic,
        spec: RolloutSpec,
        n: int,
        returns: DiscountedReturns,
        draws: Draws | None = None,
        arrays: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.actor, self.spec, self.returns = actor, spec, returns
        self.ids = np.arange(n)
        self.device = next(actor.parameters()).device
        a = self.arrays = arrays if arrays is not None else local_arrays(rollout_specs(spec, n))
        self.obs: np.ndarray | dict[str, np.ndarray] = _observations(a, "obs")
        self.actions, self.masks = a["actions"], a.get("masks")
        self.logprobs, self.values, self.rewards = a["logprobs"], a["values"], a["rewards"]
        self.discounted, self.final_values = a["discounted"], a["final_values"]
        self.terminated, self.truncated = a["terminated"], a["truncated"]
        self.final_values[:] = 0.0  # only truncated steps are written
        self.first, self.start_state = a.get("first"), a.get("start_state")
        self.acted_state: State = None  # the policy's state after the last step acted
        # None: torch's global stream (seeded per process)
        self.draws = draws if draws is not None else Draws()

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
        if self.first is not None and self.start_state is not None:  # what an update replays
            self.first[t] = stream.first
            if t == 0:
                self.start_state[:] = torch.as_tensor(stream.state).cpu().numpy()
        acted = self.actor.act(obs, stream.state, stream.first, "sampled", self.draws, mask)
        assert acted.logprob is not None
        assert acted.value is not None
        stream.state = self.acted_state = acted.state
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
            # a recurrent policy's value of the true last observation: stepped on from
            # the state that acted in the same episode
            state = None if self.acted_state is None else self.acted_state[truncated]
            values = self.actor.value(final, state, envs=np.flatnonzero(truncated))
            self.final_values[t, truncated] = values.cpu().numpy()

    @torch.no_grad()
    def close(self, stream: EnvStream) -> None:
        """Store the observations after the last step (`stream`'s, where the envs are
        now) and their values (a recurrent policy's, from the stream's state)."""
        put(_observations(self.arrays, "last_obs"), slice(None), stream.obs)
        values = self.actor.value(obs_tensor(stream.obs, self.device), stream.state, stream.first)
        self.arrays["last_values"][:] = values.cpu().numpy()

    def finish(self, stream: EnvStream) -> dict[str, Any]:
        self.close(stream)
        return batch_of(self.arrays, self.spec)


def batch_of(
    arrays: Mapping[str, np.ndarray], spec: RolloutSpec, raw: bool = False
) -> dict[str, Any]:
    """The flat batch of a closed rollout's arrays (`rollout_specs`; one actor's, or
    several `merged`): GAE advantages and returns, every [T, B] field flattened step
    by step (row t * B + b). `raw`: also what V-trace relabels from (the rewards as
    learned from, the ends, the truncated episodes' final values, `last_obs`)."""
    adv, ret = advantages_and_returns(
        arrays["rewards"],
        arrays["values"],
        arrays["last_values"],
        arrays["terminated"],
        arrays["truncated"],
        arrays["final_values"],
        spec.gamma,
        spec.gae_lambda,
    )
    steps, n = arrays["rewards"].shape
    batch: dict[str, Any] = {
        "obs": _observations(arrays, "obs"),
        "actions": arrays["actions"],
        "logprobs": arrays["logprobs"],
        "values": arrays["values"].astype(np.float32),
        "advantages": adv.astype(np.float32),
        "returns": ret.astype(np.float32),
        "discounted": arrays["discounted"],  # for the reward scale, not the loss
    }
    for key in ("masks", "first"):
        if key in arrays:
            batch[key] = arrays[key]
    if raw:
        batch |= {
            "rewards": arrays["rewards"].astype(np.float32),
            "terminated": arrays["terminated"],
            "truncated": arrays["truncated"],
            "final_values": arrays["final_values"].astype(np.float32),
        }
    flat = {
        k: map_leaves(lambda v: v.reshape(steps * n, *v.shape[2:]), v) for k, v in batch.items()
    }
    if raw:
        flat["last_obs"] = map_leaves(np.copy, _observations(arrays, "last_obs"))
    if "start_state" in arrays:  # one row per env: the update picks them by env
        flat["start_state"] = np.copy(arrays["start_state"])
    return flat


def merged(segments: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One rollout from the segments of several actors (each [T, n_i] per step, [n_i]
    after the last), side by side on the env axis; always a copy, so that the
    segments' storage may be reused at once."""
    return {
        key: np.concatenate([s[key] for s in segments], axis=0 if per_env(key) else 1)
        for key in segments[0]
    }


def rollout_draws(seed: int, *path: int) -> Draws:
    """The torch stream a rollout's actions are drawn from: actor `path[0]`'s (the sync
    and serial loops draw as actor 0 does, so that an asynchronous run with lag 0 and
    one actor gives theirs)."""
    generator = torch.Generator().manual_seed(seeding.integer(seed, "explore", *path))
    return Draws(generator=generator)


def _truncated_final_obs(infos: dict[str, Any], truncated: np.ndarray) -> list[Any]:
    if not truncated.any():
        return []
    return list(infos["final_obs"][truncated])


EpisodeSink = Callable[[dict[str, Any]], None]  # takes the infos of finished episodes


def fill(
    rollout: Rollout, envs: gym.vector.VectorEnv, stream: EnvStream, episodes: EpisodeSink
) -> None:
    """Act `rollout.spec.num_steps` vector steps from `stream` into `rollout`; `stream`
    moves on to where the envs are after it (close the rollout with its `obs`)."""
    obs, mask = stream.obs, stream.mask
    for t in range(rollout.spec.num_steps):
        actions = rollout.act(t, obs, stream, mask)
        obs, reward, terminated, truncated, infos = envs.step(actions)
        mask = batch_mask(infos)  # the new observations' (after a reset: the reset's)
        stream.stepped(terminated, truncated)
        rollout.record(t, reward, terminated, truncated, _truncated_final_obs(infos, truncated))
        episodes(infos.get("final_info", {}))
    stream.obs, stream.mask = obs, mask


def collect(
    actor: ActorCritic,
    spec: RolloutSpec,
    envs: gym.vector.VectorEnv,
    stream: EnvStream,
    episodes: EpisodeSink,
    draws: Draws | None = None,
) -> dict[str, Any]:
    """One rollout of `spec.num_steps` vector steps acted by `actor` from `stream`
    (moved on to where the envs are after it), its actions drawn from `draws` (None:
    torch's global stream); returns the flattened batch for the update (advantages
    and returns included)."""
    rollout = Rollout(actor, spec, envs.num_envs, stream.returns, draws)
    fill(rollout, envs, stream, episodes)
    return rollout.finish(stream)


__all__ = [
    "EnvStream",
    "EpisodeSink",
    "Rollout",
    "RolloutSpec",
    "advantages_and_returns",
    "batch_of",
    "collect",
    "fill",
    "merged",
    "per_env",
    "rollout_draws",
    "rollout_specs",
]
