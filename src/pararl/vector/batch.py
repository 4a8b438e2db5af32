"""A group of envs stepped one after another into rows of batch arrays.

This is the one place where env semantics live (autoreset modes, seeding, info
collection). The worker process runs an `EnvBatch` over shared-memory arrays; the
serial twin runs one over ordinary arrays. Both therefore produce, for every env,
exactly the same trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from pararl.vector.shared import Tree, read_row, write_row

InfoRows = list[tuple[int, dict[str, Any]]]

# Stands for "this env's final observation is in `BatchArrays.final_obs`"; an
# observation is never None, so None cannot be mistaken for one.
FINAL_OBS_IN_ARRAY = None


def fill_final_obs(infos: dict[str, Any], final_obs: Tree | None, rows: np.ndarray) -> None:
    """Replace the placeholders in batched SAME_STEP infos by copies of the final
    observations; `rows[p]` is the env row of batch position p."""
    column = infos.get("final_obs")
    if column is None:
        return
    for p in np.flatnonzero(infos["_final_obs"]):
        if column[p] is FINAL_OBS_IN_ARRAY:
            column[p] = read_row(final_obs, int(rows[p]))


# Methods that must go through the vector env's own calls, never `call(name)`.
RESERVED_CALLS = frozenset({"reset", "step", "close"})


@dataclass
class BatchArrays:
    """The batch-wide arrays an `EnvBatch` reads actions from and writes results to."""

    obs: Tree
    actions: Tree
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    final_obs: Tree | None = None  # SAME_STEP only: last observations of ended episodes


class _ActionRows:
    """This batch's actions, by local index. Discrete actions are read in one bulk
    `tolist()` per step (Python ints are also what envs check fastest); others are
    read row by row, as private copies."""

    def __init__(self, tree: Tree, rows: slice) -> None:
        self.tree, self.rows = tree, rows
        self.bulk = (
            isinstance(tree, np.ndarray)
            and tree.ndim == 1
            and np.issubdtype(tree.dtype, np.integer)
        )

    def current(self) -> Any:
        if self.bulk:
            return self.tree[self.rows].tolist()
        start = self.rows.start
        return _RowView(self.tree, start)


class _RowView:
    def __init__(self, tree: Tree, start: int) -> None:
        self.tree, self.start = tree, start

    def __getitem__(self, local: int) -> Any:
        return read_row(self.tree, self.start + local)


class _Results:
    """One call's results, gathered in lists and stored into the batch arrays in
    bulk: one numpy assignment per array instead of one per env."""

    def __init__(self) -> None:
        self.obs: list[Any] = []
        self.rewards: list[Any] = []
        self.terminations: list[bool] = []
        self.truncations: list[bool] = []

    def add(self, obs: Any, reward: Any, terminated: bool, truncated: bool) -> None:
        self.obs.append(obs)
        self.rewards.append(reward)
        self.terminations.append(terminated)
        self.truncations.append(truncated)

    def store(self, arrays: BatchArrays, rows: slice | np.ndarray) -> None:
        if isinstance(arrays.obs, np.ndarray):
            arrays.obs[rows] = self.obs
        else:  # Dict/Tuple spaces: leaf by leaf
            indices = range(rows.start, rows.stop) if isinstance(rows, slice) else rows
            for row, obs in zip(indices, self.obs, strict=True):
                write_row(arrays.obs, int(row), obs)
        arrays.rewards[rows] = self.rewards
        arrays.terminations[rows] = self.terminations
        arrays.truncations[rows] = self.truncations


class EnvBatch:
    """Envs `offset .. offset+len(envs)-1` of a vector env, stepped serially.

    `step`/`reset` take *local* indices (0-based within this batch) and return the
    non-empty infos as `(global_row, info)` pairs. If an env raises, `failed_env`
    holds its global index and the exception propagates.
    """

    def __init__(
        self,
        envs: Sequence[gym.Env],
        offset: int,
        arrays: BatchArrays,
        autoreset_mode: AutoresetMode,
    ) -> None:
        self.envs = list(envs)
        self.offset = offset
        self.arrays = arrays
        self.autoreset_mode = autoreset_mode
        self.failed_env: int | None = None
        self._all = range(len(self.envs))
        self._all_rows = slice(offset, offset + len(self.envs))
        self._needs_reset = [False] * len(self.envs)
        self._actions = _ActionRows(arrays.actions, self._all_rows)

    def _rows(self, ids: Sequence[int]) -> slice | np.ndarray:
        if ids is self._all:
            return self._all_rows
        return np.asarray(ids, dtype=np.int64) + self.offset

    def reset(
        self,
        local_ids: Sequence[int] | None,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
    ) -> InfoRows:
        """Reset envs `local_ids` (all when None); `seeds` has one entry per reset env."""
        infos: InfoRows = []
        ids = self._all if local_ids is None else local_ids
        out = _Results()
        for local, seed in zip(ids, seeds, strict=True):
            row = self.offset + local
            try:
                obs, info = self.envs[local].reset(seed=seed, options=options)
            except Exception:
                self.failed_env = row
                raise
            out.add(obs, 0.0, False, False)
            self._needs_reset[local] = False
            if info:
                infos.append((row, info))
        out.store(self.arrays, self._rows(ids))
        return infos

    def step(self, local_ids: Sequence[int] | None) -> InfoRows:
        """Step envs `local_ids` (all when None) with the actions in their rows."""
        ids = self._all if local_ids is None else local_ids
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            return self._step_same(ids)
        if self.autoreset_mode is AutoresetMode.DISABLED:
            for local in ids:
                if self._needs_reset[local]:
                    raise RuntimeError(
                        f"env {self.offset + local} ended and autoreset_mode is DISABLED: "
                        "reset it (reset(options={'reset_mask': ...})) before stepping it again."
                    )
        return self._step_next(ids)

    def _step_next(self, ids: Sequence[int]) -> InfoRows:
        # NEXT_STEP: an env that ended last step is reset now, with reward 0 and no
        # termination. (DISABLED shares this loop: no env reaches the reset branch.)
        infos: InfoRows = []
        envs, needs_reset, offset = self.envs, self._needs_reset, self.offset
        actions, out = self._actions.current(), _Results()
        add, row = out.add, offset
        try:
            for local in ids:
                row = offset + local
                if needs_reset[local]:
                    obs, info = envs[local].reset()
                    add(obs, 0.0, False, False)
                    needs_reset[local] = False
                else:
                    obs, reward, terminated, truncated, info = envs[local].step(actions[local])
                    add(obs, reward, terminated, truncated)
                    needs_reset[local] = terminated or truncated
                if info:
                    infos.append((row, info))
        except Exception:
            self.failed_env = row
            raise
        out.store(self.arrays, self._rows(ids))
        return infos

    def _step_same(self, ids: Sequence[int]) -> InfoRows:
        # SAME_STEP: an env that ends is reset in the same step; its last observation
        # and info go to `final_obs` / `final_info`.
        infos: InfoRows = []
        row, actions, out = self.offset, self._actions.current(), _Results()
        try:
            for local in ids:
                row = self.offset + local
                env = self.envs[local]
                obs, reward, terminated, truncated, info = env.step(actions[local])
                if terminated or truncated:
                    # the final observation travels through shared memory; the reader
                    # fills in this placeholder (see `fill_final_obs`)
                    write_row(self.arrays.final_obs, row, obs)
                    infos.append((row, {"final_obs": FINAL_OBS_IN_ARRAY, "final_info": info}))
                    obs, info = env.reset()
                out.add(obs, reward, terminated, truncated)
                if info:
                    infos.append((row, info))
        except Exception:
            self.failed_env = row
            raise
        out.store(self.arrays, self._rows(ids))
        return infos

    # --- attribute access, as Gymnasium's vector envs do it -----------------------

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        if name in RESERVED_CALLS:
            raise ValueError(f"use the vector env's own `{name}()` instead of call({name!r})")
        results = []
        for local, env in enumerate(self.envs):
            self.failed_env = self.offset + local
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        self.failed_env = None
        return results

    def call_each(self, name: str, local_ids: Sequence[int], args: Sequence[Any]) -> list[Any]:
        """Call method `name` on envs `local_ids`, one positional argument each."""
        results = []
        for local, arg in zip(local_ids, args, strict=True):
            self.failed_env = self.offset + local
            results.append(self.envs[local].get_wrapper_attr(name)(arg))
        self.failed_env = None
        return results

    def set_attr(self, name: str, values: Sequence[Any]) -> None:
        for local, (env, value) in enumerate(zip(self.envs, values, strict=True)):
            self.failed_env = self.offset + local
            env.set_wrapper_attr(name, value)
        self.failed_env = None

    def close(self) -> None:
        for env in self.envs:
            env.close()
