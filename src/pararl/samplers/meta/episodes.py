"""Fixed-length episode storage for the multi-task sampler.

Every env owns `episodes_per_env` slots of `episode_length` steps. A slot ends
when its episode terminates or is truncated (the env's time limit is the episode
length, so a full slot is a truncation); the env's next step starts the next
slot, whose first observation is the reset observation. The final observation
of an ended episode is kept apart, in `next_observations[..., last step]`, so it
never overwrites the reset observation. Steps after an early termination are
padding with `mask` False.

The Gaussian noise of every (env, slot, step) is drawn up front from the sample
seed, so an env's actions do not depend on which other envs share its forward
pass: episodes are the same for every recv policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TaskEpisodes:
    """All episodes of one task: arrays [episodes, episode_length, ...]."""

    task: Any
    observations: np.ndarray
    next_observations: np.ndarray  # obs after each step; the final obs where an episode ended
    actions: np.ndarray
    rewards: np.ndarray
    log_probs: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    mask: np.ndarray  # True for real steps, False for padding after an early end
    env_ids: np.ndarray  # which env ran each episode

    @property
    def lengths(self) -> np.ndarray:
        return self.mask.sum(axis=1)

    @property
    def returns(self) -> np.ndarray:
        return (self.rewards * self.mask).sum(axis=1)


class EpisodeBuffer:
    """Per-env slots filled as steps come back, in any order across envs."""

    def __init__(
        self,
        num_envs: int,
        episodes_per_env: int,
        episode_length: int,
        obs_shape: tuple[int, ...],
        action_dim: int,
        seed: int | None,
    ) -> None:
        shape = (num_envs, episodes_per_env, episode_length)
        self.length = episode_length
        self.episodes_per_env = episodes_per_env
        self.obs = np.zeros((*shape, *obs_shape), np.float32)
        self.next_obs = np.zeros_like(self.obs)
        self.actions = np.zeros((*shape, action_dim), np.float32)
        self.noise = np.random.default_rng(seed).standard_normal(self.actions.shape, np.float32)
        self.rewards = np.zeros(shape, np.float64)
        self.log_probs = np.zeros(shape, np.float32)
        self.terminated = np.zeros(shape, np.bool_)
        self.truncated = np.zeros(shape, np.bool_)
        self.mask = np.zeros(shape, np.bool_)
        self.slot = np.zeros(num_envs, np.int64)  # current episode of each env
        self.t = np.zeros(num_envs, np.int64)  # step within it

    def noise_for(self, ids: np.ndarray) -> np.ndarray:
        return self.noise[ids, self.slot[ids], self.t[ids]]

    def record_act(
        self, ids: np.ndarray, obs: np.ndarray, actions: np.ndarray, log_probs: np.ndarray
    ) -> None:
        at = (ids, self.slot[ids], self.t[ids])
        self.obs[at] = obs
        self.actions[at] = actions
        self.log_probs[at] = log_probs

    def record_result(
        self,
        ids: np.ndarray,
        obs: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        infos: dict[str, Any],
    ) -> np.ndarray:
        """Store one recv's results; returns the mask of `ids` with slots left to run."""
        slot, t = self.slot[ids], self.t[ids]
        at = (ids, slot, t)
        self.rewards[at] = rewards
        self.terminated[at] = terminated
        self.truncated[at] = truncated
        self.mask[at] = True
        self.next_obs[at] = obs
        ended = terminated | truncated
        if ended.any():
            final = infos["final_obs"]
            for p in np.flatnonzero(ended):
                self.next_obs[ids[p], slot[p], t[p]] = final[p]
        t = t + 1
        if (t >= self.length).any() and not ended[t >= self.length].all():
            raise RuntimeError(
                "an episode ran past the episode length without being truncated; "
                "the env's time limit must equal the sampler's episode_length"
            )
        self.t[ids] = np.where(ended, 0, t)
        self.slot[ids] = slot + ended
        return self.slot[ids] < self.episodes_per_env

    def task_episodes(self, task: Any, env_ids: np.ndarray) -> TaskEpisodes:
        """Episodes of the envs `env_ids`, flattened to [envs * episodes_per_env, L, ...]."""

        def flat(a: np.ndarray) -> np.ndarray:
            return a[env_ids].reshape(-1, *a.shape[2:])

        return TaskEpisodes(
            task=task,
            observations=flat(self.obs),
            next_observations=flat(self.next_obs),
            actions=flat(self.actions),
            rewards=flat(self.rewards),
            log_probs=flat(self.log_probs),
            terminated=flat(self.terminated),
            truncated=flat(self.truncated),
            mask=flat(self.mask),
            env_ids=np.repeat(env_ids, self.episodes_per_env),
        )
