"""Transitions and their n-step returns, built from lock-step vector-env steps.

A stored transition is `(obs, action, ret, next_obs, discount)`, where `ret` is the
n-step discounted reward sum and `discount` is the factor for bootstrapping from
`next_obs`: `gamma**k` after k real steps, and **0 only if the episode terminated**.
Time-limit truncation keeps `discount = gamma**k` and `next_obs` = the last real
observation, so the value of a truncated state is bootstrapped, never treated as 0.

Vector envs in Gymnasium's NEXT_STEP autoreset mode return the true last
observation on the step that ends an episode; the following step is the reset step,
which carries no transition and is skipped here.

An env that gives action masks (`envs.masks`) adds `next_mask`, the mask of
`next_obs` (the step's own: NEXT_STEP returns the true last observation with its
info), which the bootstrap target maximises within.

Dict and Tuple observations are held and carried as a dict of arrays, one per leaf
(`pararl.observations`): `obs` and `next_obs` are then such dicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pararl.observations import Leaf, concat, map_leaves, put, take, zeros


@dataclass
class Transitions:
    """A batch of transitions; every field has the same leading length (each leaf of
    a dict of observations too)."""

    obs: Any  # np.ndarray, or a dict of arrays by leaf name
    action: np.ndarray
    ret: np.ndarray
    next_obs: Any
    discount: np.ndarray
    priority: np.ndarray | None = None  # the actor's |TD error| (Ape-X), when it has one
    next_mask: np.ndarray | None = None  # `next_obs`'s action masks, when the env gives them

    def __len__(self) -> int:
        return int(self.action.shape[0])

    def rows(self, index: slice | np.ndarray) -> Transitions:
        priority = None if self.priority is None else self.priority[index]
        next_mask = None if self.next_mask is None else self.next_mask[index]
        return Transitions(
            take(self.obs, index),
            self.action[index],
            self.ret[index],
            take(self.next_obs, index),
            self.discount[index],
            priority,
            next_mask,
        )

    @staticmethod
    def concat(parts: list[Transitions]) -> Transitions:
        def joined(name: str) -> Any:
            return concat([getattr(p, name) for p in parts])

        def all_or_none(name: str) -> np.ndarray | None:
            given = [getattr(p, name) for p in parts if getattr(p, name) is not None]
            return np.concatenate(given) if len(given) == len(parts) else None

        return Transitions(
            joined("obs"),
            joined("action"),
            joined("ret"),
            joined("next_obs"),
            joined("discount"),
            all_or_none("priority"),
            all_or_none("next_mask"),
        )


class NStepBuilder:
    """Turns lock-step vector-env steps into n-step transitions, per env.

    Keeps, for each env, the last `n` (obs, action, reward) of its current episode
    in a ring shared by all envs (they step together). Actions are indices by default
    (DQN); continuous actions are rows of `action_shape` (SAC's float32 vectors).
    `mask_size` > 0: each step's `next_mask` is given, and each transition carries
    the one of its `next_obs`. Given `leaves` (Dict and Tuple observations),
    observations are held leaf by leaf.
    """

    def __init__(
        self,
        num_envs: int,
        obs_shape: tuple[int, ...],
        n: int,
        gamma: float,
        obs_dtype: npt.DTypeLike = np.float32,
        action_shape: tuple[int, ...] = (),
        action_dtype: npt.DTypeLike = np.int64,
        mask_size: int = 0,
        leaves: Sequence[Leaf] = (),
    ) -> None:
        if n < 1:
            raise ValueError(f"n-step must be >= 1, got {n}")
        self.n, self.gamma, self.num_envs = n, gamma, num_envs
        self._obs: Any = (
            zeros(leaves, (n, num_envs))
            if leaves
            else np.zeros((n, num_envs, *obs_shape), dtype=obs_dtype)
        )
        self._act = np.zeros((n, num_envs, *action_shape), dtype=action_dtype)
        self._rew = np.zeros((n, num_envs), dtype=np.float64)
        self._len = np.zeros(num_envs, dtype=np.int64)  # entries held per env
        self._head = 0  # slot the next step is written to
        self._after_end = np.zeros(num_envs, dtype=np.bool_)  # next step is a reset step
        self._powers = gamma ** np.arange(n + 1)
        self.mask_size = mask_size

    def add(
        self,
        obs: Any,
        action: np.ndarray,
        reward: np.ndarray,
        next_obs: Any,
        terminated: np.ndarray,
        truncated: np.ndarray,
        next_mask: np.ndarray | None = None,
    ) -> Transitions:
        """Record one vector step (`obs` is what the actions were chosen on; with
        masks, `next_mask` is `next_obs`'s) and return the transitions that are now
        complete."""
        if self.mask_size and next_mask is None:
            raise ValueError("this builder stores action masks: give the step's next_mask")
        real = ~self._after_end  # reset steps of NEXT_STEP autoreset carry nothing
        slot = self._head
        put(self._obs, slot, obs)
        self._act[slot], self._rew[slot] = action, reward
        self._len = np.where(real, np.minimum(self._len + 1, self.n), 0)
        ended = real & (terminated | truncated)
        parts = []
        full = real & ~ended & (self._len == self.n)
        if full.any():
            envs = np.flatnonzero(full)
            parts.append(self._emit_oldest(envs, next_obs))
            if next_mask is not None:
                parts[-1].next_mask = next_mask[envs]
        for env in np.flatnonzero(ended):
            parts.append(self._flush(int(env), take(next_obs, env), bool(terminated[env])))
            if next_mask is not None:
                parts[-1].next_mask = np.repeat(next_mask[env][None], len(parts[-1]), axis=0)
        self._len[ended] = 0
        self._after_end = ended
        self._head = (slot + 1) % self.n
        return Transitions.concat(parts) if parts else self.empty(next_obs)

    def _emit_oldest(self, envs: np.ndarray, next_obs: Any) -> Transitions:
        # Slots from oldest to newest for envs holding n entries.
        order = (self._head + 1 + np.arange(self.n)) % self.n
        ret = (self._rew[order][:, envs] * self._powers[: self.n, None]).sum(axis=0)
        return Transitions(
            take(self._obs, (order[0], envs)),
            self._act[order[0], envs],
            ret,
            take(next_obs, envs),
            np.full(envs.size, self._powers[self.n]),
        )

    def _flush(self, env: int, last_obs: Any, terminated: bool) -> Transitions:
        # An episode ended: every held entry becomes a transition ending at last_obs.
        k = int(self._len[env])
        order = (self._head - k + 1 + np.arange(k)) % self.n  # oldest .. newest
        rew = self._rew[order, env]
        rets = np.array([(rew[i:] * self._powers[: k - i]).sum() for i in range(k)])
        steps = k - np.arange(k)
        discount = np.zeros(k) if terminated else self._powers[steps]
        return Transitions(
            take(self._obs, (order, env)),
            self._act[order, env],
            rets,
            map_leaves(lambda a: np.repeat(np.asarray(a)[None], k, axis=0), last_obs),
            discount,
        )

    def empty(self, like_obs: Any) -> Transitions:
        def none(a: np.ndarray) -> np.ndarray:
            return np.zeros((0, *a.shape[1:]), a.dtype)

        return Transitions(
            map_leaves(none, like_obs),
            np.zeros((0, *self._act.shape[2:]), self._act.dtype),
            np.zeros(0),
            map_leaves(none, like_obs),
            np.zeros(0),
            next_mask=np.zeros((0, self.mask_size), bool) if self.mask_size else None,
        )
