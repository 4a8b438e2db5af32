"""A group of envs stepped one after another into rows of batch arrays.

This is the one place where env semantics live (autoreset modes, seeding, info
collection). The worker process runs an `EnvBatch` over shared-memory arrays; the
serial twin runs one over ordinary arrays. Both therefore produce, for every env,
exactly the same trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode

from pararl.vector.frame_ring import FrameRing, StackSpec, unstacked
from pararl.vector.infos import FinalEntry
from pararl.vector.spaces import Pickled, Tree, write_row

InfoRows = list[tuple[int, dict[str, Any]]]


def fill_final_obs(infos: dict[str, Any], final_obs: np.ndarray | None, rows: np.ndarray) -> None:
    """Fill the entries of batched SAME_STEP infos whose final observation is in the
    shared array (None: an observation that fits the array is never None) with copies
    of it; `rows[p]` is the env row of batch position p."""
    column = infos.get("final_obs")
    if column is None or final_obs is None:
        return
    ended = np.flatnonzero(infos["_final_obs"]).tolist()
    positions = [p for p in ended if column[p] is None]
    # One copy of every row needed; each env gets its row of it.
    for p, value in zip(positions, final_obs[rows[positions]], strict=True):
        column[p] = value


# Methods that must go through the vector env's own calls, never `call(name)`
# (Gymnasium's list, whose error message the worker raises).
RESERVED_CALLS = frozenset({"reset", "step", "close", "_setattr", "_check_spaces"})


@dataclass
class BatchArrays:
    """The batch-wide arrays an `EnvBatch` reads actions from and writes results to."""

    obs: Tree
    actions: np.ndarray | None  # None: actions always come with the step command
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    # SAME_STEP, one shared array observation: last observations of ended episodes.
    final_obs: np.ndarray | None = None
    pickled: list[Pickled] = field(default_factory=list)  # obs leaves sent in replies
    # info keys whose values go to the env's row of these arrays, not into the reply
    infos: dict[str, np.ndarray] = field(default_factory=dict)


def _listed(actions: np.ndarray, rows: slice, ids: Sequence[int], whole: bool) -> list[Any]:
    """The actions of envs `ids` from the shared array, in order: numpy scalars or row
    copies (an env may keep its action), as Gymnasium's vector envs pass them."""
    if not whole:
        return list(actions[np.add(ids, rows.start)])  # fancy indexing copies
    mine = actions[rows]
    return list(mine.copy() if mine.ndim > 1 else mine)


def _fits(final: np.ndarray | None, value: Any) -> bool:
    """Whether `value` comes out of a row of `final` as itself: an array of the
    row's dtype and shape (anything else travels pickled, as the env returned it)."""
    return (
        final is not None
        and type(value) is np.ndarray
        and value.dtype == final.dtype
        and value.shape == final.shape[1:]
    )


Step = tuple[Any, Any, Any, Any, dict[str, Any]]  # obs, reward, terminated, truncated, info


def _store(
    arrays: BatchArrays, rows: slice | np.ndarray, steps: list[Step], fresh: Sequence[bool]
) -> list[Any]:
    """Store a call's results into the batch arrays, one numpy assignment per array
    (per leaf for Dict/Tuple observations; per row for frame rings, where `fresh`
    marks the first observations of episodes); returns the infos, in order."""
    if not steps:
        return []
    obs, rewards, terminations, truncations, infos = zip(*steps, strict=True)
    if isinstance(arrays.obs, np.ndarray):
        arrays.obs[rows] = obs
    elif isinstance(arrays.obs, FrameRing):
        indices = range(rows.start, rows.stop) if isinstance(rows, slice) else rows.tolist()
        arrays.obs.write(indices, obs, fresh)
    else:  # Dict/Tuple spaces: leaf by leaf
        indices = range(rows.start, rows.stop) if isinstance(rows, slice) else rows
        for row, value in zip(indices, obs, strict=True):
            write_row(arrays.obs, int(row), value)
    arrays.rewards[rows] = rewards
    arrays.terminations[rows] = terminations
    arrays.truncations[rows] = truncations
    if arrays.infos:
        return _shared_infos(arrays.infos, rows, infos)
    return list(infos)


def _shared_infos(
    shared: dict[str, np.ndarray], rows: slice | np.ndarray, infos: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Move each shared key's value out of every info into the env's row of its array
    (reshaped to the row: a value of that many elements); the infos without them."""
    indices = range(rows.start, rows.stop) if isinstance(rows, slice) else rows.tolist()
    rest = []
    for row, info in zip(indices, infos, strict=True):
        info = dict(info)  # the env's own dict is left as it was
        for key, column in shared.items():
            if key not in info:
                raise RuntimeError(
                    f"env {row} returned no info[{key!r}]: the vector env carries it for "
                    "every env, so each reset and step of each env must give it"
                )
            column[row] = np.reshape(info.pop(key), column.shape[1:])
        rest.append(info)
    return rest


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
        # the envs stepped and reset: under their frame stacks when the batch keeps
        # the stacks in rings (`frames`); `envs` still answers calls and attributes
        ring = arrays.obs
        self._stepped = (
            unstacked(self.envs, StackSpec(ring.size, ring.padding), offset)
            if isinstance(ring, FrameRing)
            else self.envs
        )
        self._ring = ring if isinstance(ring, FrameRing) else None
        self.offset = offset
        self.arrays = arrays
        self.autoreset_mode = autoreset_mode
        self.failed_env: int | None = None
        self._all = range(len(self.envs))
        self._all_rows = slice(offset, offset + len(self.envs))
        self._needs_reset = [False] * len(self.envs)

    def _rows(self, ids: Sequence[int]) -> slice | np.ndarray:
        if ids is self._all:
            return self._all_rows
        return np.asarray(ids, dtype=np.int64) + self.offset

    def rows_of(self, local_ids: Sequence[int] | None) -> slice | list[int]:
        """The global rows of `local_ids` (all when None), in order."""
        if local_ids is None:
            return self._all_rows
        return [self.offset + i for i in local_ids]

    def check_spaces(
        self, mode: str, observation_space: gym.Space, action_space: gym.Space
    ) -> list[tuple[bool, bool]]:
        """Per env: does its observation space match (`same`: equal; otherwise the
        same shapes and dtypes), and is its action space equal?"""
        return [
            (
                env.observation_space == observation_space
                if mode == "same"
                else is_space_dtype_shape_equiv(env.observation_space, observation_space),
                env.action_space == action_space,
            )
            for env in self.envs
        ]

    def reset(
        self,
        local_ids: Sequence[int] | None,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
    ) -> InfoRows:
        """Reset envs `local_ids` (all when None); `seeds` has one entry per reset env."""
        ids = self._all if local_ids is None else local_ids
        steps: list[Step] = []
        for local, seed in zip(ids, seeds, strict=True):
            try:
                obs, info = self._stepped[local].reset(seed=seed, options=options)
            except Exception:
                self.failed_env = self.offset + local
                raise
            steps.append((obs, 0.0, False, False, info))
            self._needs_reset[local] = False
        fresh = [True] * len(steps)
        return self._info_rows(ids, _store(self.arrays, self._rows(ids), steps, fresh))

    def _info_rows(self, ids: Sequence[int], infos: list[dict[str, Any]]) -> InfoRows:
        offset = self.offset
        return [(offset + local, info) for local, info in zip(ids, infos, strict=True) if info]

    def _failed(self, ids: Sequence[int], done: int) -> None:
        self.failed_env = self.offset + ids[done]

    def _actions(self, ids: Sequence[int], given: list[Any] | None) -> list[Any]:
        if given is not None:
            return given
        assert self.arrays.actions is not None
        return _listed(self.arrays.actions, self._all_rows, ids, ids is self._all)

    def step(self, local_ids: Sequence[int] | None, actions: list[Any] | None = None) -> InfoRows:
        """Step envs `local_ids` (all when None) with `actions` (one per env, in
        order), or, when None, with the actions in their rows of the shared array."""
        ids = self._all if local_ids is None else local_ids
        listed = self._actions(ids, actions)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            return self._step_same(ids, listed)
        if self.autoreset_mode is AutoresetMode.DISABLED:
            for local in ids:
                if self._needs_reset[local]:
                    raise RuntimeError(
                        f"env {self.offset + local} ended and autoreset_mode is DISABLED: "
                        "reset it (reset(options={'reset_mask': ...})) before stepping it again."
                    )
        return self._step_next(ids, listed)

    def _step_next(self, ids: Sequence[int], actions: list[Any]) -> InfoRows:
        # NEXT_STEP: an env that ended last step is reset now, with reward 0 and no
        # termination. (DISABLED shares this loop: no env reaches the reset branch.)
        whole = ids is self._all
        envs = self._stepped if whole else [self._stepped[i] for i in ids]
        needs_reset = self._needs_reset if whole else [self._needs_reset[i] for i in ids]
        steps: list[Step] = []
        append = steps.append
        try:
            for env, action, restart in zip(envs, actions, needs_reset, strict=True):
                if restart:
                    obs, info = env.reset()
                    append((obs, 0, False, False, info))
                else:
                    append(env.step(action))
        except Exception:
            self._failed(ids, len(steps))
            raise
        infos = _store(self.arrays, self._rows(ids), steps, needs_reset)
        ended = [bool(s[2] or s[3]) for s in steps]
        if whole:
            self._needs_reset = ended
        else:
            for local, flag in zip(ids, ended, strict=True):
                self._needs_reset[local] = flag
        return self._info_rows(ids, infos)

    def _step_same(self, ids: Sequence[int], actions: list[Any]) -> InfoRows:
        # SAME_STEP: an env that ends is reset in the same step; its last observation
        # and info go to `final_obs` / `final_info`.
        whole = ids is self._all
        envs = self._stepped if whole else [self._stepped[i] for i in ids]
        steps: list[Step] = []
        finals: list[tuple[int, Step]] = []  # (position, the step that ended)
        append, ring = steps.append, self._ring
        try:
            for env, action in zip(envs, actions, strict=True):
                step = env.step(action)
                if step[2] or step[3]:
                    if ring is not None:  # the final stack, before the reset refills it
                        final = ring.stacked_with(self.offset + ids[len(steps)], step[0])
                        step = (final, *step[1:])
                    finals.append((len(steps), step))
                    obs, info = env.reset()
                    step = (obs, step[1], step[2], step[3], info)
                append(step)
        except Exception:
            self._failed(ids, len(steps))
            raise
        fresh: list[bool] = []
        if ring is not None:  # which rows a reset refilled
            fresh = [False] * len(steps)
            for position, _ in finals:
                fresh[position] = True
        infos = _store(self.arrays, self._rows(ids), steps, fresh)
        if not finals:
            return self._info_rows(ids, infos)
        return self._with_finals(ids, infos, finals)

    def _with_finals(
        self, ids: Sequence[int], infos: list[dict[str, Any]], finals: list[tuple[int, Step]]
    ) -> InfoRows:
        """Info rows of a SAME_STEP call in which envs ended, in env order: an ended
        env's final entry (its final observation through shared memory when it fits
        there exactly, see `fill_final_obs`), then its reset info."""
        ended = dict(finals)
        final = self.arrays.final_obs
        rows: InfoRows = []
        for position in sorted({p for p, info in enumerate(infos) if info}.union(ended)):
            row, last = self.offset + ids[position], ended.get(position)
            if last is not None:
                if _fits(final, last[0]):
                    assert final is not None
                    final[row] = last[0]
                    rows.append((row, FinalEntry(None, last[4])))  # in the shared array
                else:
                    rows.append((row, FinalEntry(last[0], last[4])))
            if infos[position]:
                rows.append((row, infos[position]))
        return rows

    # --- attribute access, as Gymnasium's vector envs do it -----------------------

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        if name in RESERVED_CALLS:
            raise ValueError(
                f"Trying to call function `{name}` with `call`, use `{name}` directly instead."
            )
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
