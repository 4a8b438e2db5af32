"""The vector-env front end shared by the serial twin and the parallel env.

It speaks Gymnasium's `VectorEnv` API (plus `AsyncVectorEnv`'s `*_async`/`*_wait`
calls and EnvPool-style partial `send`/`recv`) and turns every call into commands
for the env batches behind a `Transport`. Which envs are in flight is tracked per
worker, so partial stepping and full steps share one code path.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from pararl.mp.procs import CLOSE_GRACE_S
from pararl.mp.shared import ArraySpec
from pararl.vector.batch import fill_final_obs
from pararl.vector.errors import (
    AlreadyPendingCallError,
    ClosedEnvironmentError,
    NoAsyncCallError,
    WorkerError,
    WorkerTimeoutError,
)
from pararl.vector.infos import unpack_infos
from pararl.vector.spaces import checked_ids, put_rows, space_specs, take_rows
from pararl.vector.transport import Transport
from pararl.vector.worker import BatchLayout

Reply = tuple[np.ndarray, Any]  # (global env ids of a command, the worker's payload)


def expand_seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    """Gymnasium's rule: None -> no seeds, int s -> s, s+1, ..., list -> as given."""
    if seed is None:
        return [None] * n
    if isinstance(seed, (int, np.integer)):
        return [int(seed) + i for i in range(n)]
    seeds = list(seed)
    if len(seeds) != n:
        raise ValueError(f"got {len(seeds)} seeds for {n} envs; pass one per env, an int or None")
    return seeds


def reset_mask_ids(options: dict[str, Any] | None, n: int) -> tuple[np.ndarray, dict | None]:
    """Env ids to reset (from `options['reset_mask']`, else all) and the options left."""
    if not options or "reset_mask" not in options:
        return np.arange(n), options
    options = dict(options)
    mask = options.pop("reset_mask")
    if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_ or mask.shape != (n,):
        raise TypeError(f"options['reset_mask'] must be a bool numpy array of shape ({n},)")
    if not mask.any():
        raise ValueError("options['reset_mask'] must select at least one env")
    return np.flatnonzero(mask), options


def _returned_rows(replies: list[Reply]) -> tuple[np.ndarray, np.ndarray | slice]:
    """The env ids of `replies`, ascending, and how to select their rows: a slice
    when they are one run of rows (one worker's envs, the usual case), which copies
    faster than a fancy index."""
    if not replies:
        return np.arange(0), np.arange(0)
    if len(replies) == 1:
        ids = replies[0][0].copy()  # a command's ids are ascending; ours to keep
    else:
        ids = np.sort(np.concatenate([r[0] for r in replies]))
    first, last = int(ids[0]), int(ids[-1])
    if last - first + 1 == ids.size:
        return ids, slice(first, last + 1)
    return ids, ids


class BatchVectorEnv(gym.vector.VectorEnv):
    """Front end over a transport; subclasses only choose the transport."""

    def __init__(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        *,
        copy: bool = True,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        worker_timeout: float | None = 300.0,
    ) -> None:
        self.closed = True  # until the transport is up: __del__ and close() are safe
        env_fns = list(env_fns)
        if not env_fns:
            raise ValueError("env_fns is empty: pass at least one env factory")
        self.num_envs = len(env_fns)
        self.copy = copy
        self.worker_timeout = worker_timeout
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        dummy = env_fns[0]()
        self.metadata = {**dummy.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = dummy.render_mode
        self.spec = None
        self.single_observation_space = dummy.observation_space
        self.single_action_space = dummy.action_space
        dummy.close()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        layout = BatchLayout(
            self.single_observation_space, self.single_action_space, self.autoreset_mode
        )
        n = self.num_envs
        specs = {
            **space_specs(self.single_observation_space, n, "obs"),
            **space_specs(self.single_action_space, n, "act"),
            "rew": ArraySpec((n,), np.dtype(np.float64)),
            "term": ArraySpec((n,), np.dtype(np.bool_)),
            "trunc": ArraySpec((n,), np.dtype(np.bool_)),
        }
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            specs.update(space_specs(self.single_observation_space, n, "final"))
        self._transport = self._make_transport(env_fns, specs, layout)
        self._arrays = self._transport.arrays
        # Where each worker's rows start, and the end: cuts sorted ids by worker.
        self._worker_starts = np.array([r.start for r in self._transport.slices] + [n])
        self._worker_rows = [np.arange(r.start, r.stop) for r in self._transport.slices]
        self._pending: list[deque[np.ndarray]] = [deque() for _ in self._transport.slices]
        # When each worker started on its oldest pending command: worker_timeout runs
        # from there, per worker, so a hung worker is caught even while others reply.
        self._busy_since = [0.0] * len(self._transport.slices)
        # Seconds each worker took for its latest reply (start of its command to the
        # reply's arrival here): free per-worker step times for recv policies.
        self._reply_seconds = np.full(len(self._transport.slices), np.nan)
        self._arrived: list[Reply] = []  # replies received but not yet returned
        self._in_flight = np.zeros(n, dtype=np.bool_)
        self._all_ids = np.arange(n)
        self._state = "default"
        self.closed = False

    def _make_transport(
        self,
        env_fns: Sequence[Callable[[], gym.Env]],
        specs: dict[str, ArraySpec],
        layout: BatchLayout,
    ) -> Transport:
        raise NotImplementedError

    @property
    def num_workers(self) -> int:
        return len(self._transport.slices)

    # --- commands out, replies in --------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Any worker failure takes the whole env down before it is re-raised."""
        if self.closed:
            raise ClosedEnvironmentError(f"{type(self).__name__} is closed; create a new one.")
        try:
            yield
        except (WorkerError, KeyboardInterrupt):
            self.close(terminate=True)
            raise

    def _require(self, state: str, call: str) -> None:
        if self._state != state:
            if state == "default":
                raise AlreadyPendingCallError(
                    f"`{call}` called while a `{self._state}` call is pending; "
                    f"finish it first (its *_wait/recv).",
                    self._state,
                )
            raise NoAsyncCallError(f"`{call}` called without a pending `{state}` call.", state)

    def _submit(
        self, command: str, ids: np.ndarray, data: Callable[[list[int] | None, np.ndarray], Any]
    ) -> None:
        """Send `command` to the worker of every env in `ids` (ascending, unique);
        `data(local_ids, rows)` builds a worker's payload from its envs' local ids
        (None: all of them, in order) and global rows."""
        now = time.monotonic()
        if ids.size == self.num_envs:  # the hot path: every worker takes all its envs
            for w, rows in enumerate(self._worker_rows):
                self._transport.submit(w, command, data(None, rows))
                if not self._pending[w]:
                    self._busy_since[w] = now
                self._pending[w].append(rows)
            self._in_flight[:] = True
            return
        cuts = np.searchsorted(ids, self._worker_starts).tolist()
        for w, rows in enumerate(self._worker_rows):
            mine = ids[cuts[w] : cuts[w + 1]]
            if mine.size:
                whole = mine.size == rows.size  # ids are unique, so these are all its envs
                local = None if whole else (mine - rows[0]).tolist()
                self._transport.submit(w, command, data(local, mine))
                if not self._pending[w]:
                    self._busy_since[w] = now
                self._pending[w].append(mine)
                self._in_flight[mine] = True

    def _collect(
        self,
        *,
        min_envs: int | None = None,
        window: float | None = None,
        timeout: float | None = None,
    ) -> list[Reply]:
        """Wait for replies: all pending ones; or until `min_envs` envs are back; or
        for the first, then whatever else arrives within `window` seconds."""
        start = time.monotonic()
        first_at: float | None = None if not self._arrived else start
        got = sum(ids.size for ids, _ in self._arrived)
        while True:
            busy = [w for w, q in enumerate(self._pending) if q]
            if not busy or (min_envs is not None and got >= min_envs):
                break
            now = time.monotonic()
            if window is not None and first_at is not None and now >= first_at + window:
                break
            stalled = min(busy, key=self._busy_since.__getitem__)
            stall_deadline = (
                None
                if self.worker_timeout is None
                else self._busy_since[stalled] + self.worker_timeout
            )
            deadlines = [
                t
                for t in (
                    None if timeout is None else start + timeout,
                    stall_deadline,
                    None if window is None or first_at is None else first_at + window,
                )
                if t is not None
            ]
            wait = max(0.0, min(deadlines) - now) if deadlines else None
            ready = self._transport.ready(busy, wait)
            if ready:
                arrived = time.monotonic()
                for w in ready:
                    self._reply_seconds[w] = arrived - self._busy_since[w]
                    payload = self._transport.receive(w)
                    ids = self._pending[w].popleft()
                    self._in_flight[ids] = False
                    self._arrived.append((ids, payload))
                    got += ids.size
                    self._busy_since[w] = arrived  # on to its next command, if any
                first_at = first_at or arrived
                continue
            now = time.monotonic()
            if timeout is not None and now >= start + timeout:
                raise mp.TimeoutError(f"no result within {timeout} s; call again to keep waiting")
            if stall_deadline is not None and now >= stall_deadline:
                raise WorkerTimeoutError(
                    stalled,
                    f"no reply within worker_timeout={self.worker_timeout} s; its env hangs",
                )
        done, self._arrived = self._arrived, []
        return done

    def _results(
        self, replies: list[Reply], full: bool
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        a = self._arrays
        sel: np.ndarray | slice | None
        if full:
            ids, sel = self._all_ids, None
            obs = take_rows(a.obs, None) if self.copy else a.obs
        else:
            ids, sel = _returned_rows(replies)
            obs = take_rows(a.obs, sel)
        infos: dict[str, Any] = {}
        if len(replies) > 1:
            replies = sorted(replies, key=lambda r: int(r[0][0]))
        for command_ids, packed in replies:
            if packed is not None:
                at = command_ids if full else np.searchsorted(ids, command_ids)
                unpack_infos(infos, packed, at, ids.size)
        fill_final_obs(infos, a.final_obs, ids)
        return (
            obs,
            take_rows(a.rewards, sel),
            take_rows(a.terminations, sel),
            take_rows(a.truncations, sel),
            infos,
            ids,
        )

    # --- Gymnasium API: reset / step ---------------------------------------------

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(
        self, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        with self._guard():
            self._require("default", "reset_async")
            seeds = expand_seeds(seed, self.num_envs)
            ids, options = reset_mask_ids(options, self.num_envs)
            self._submit(
                "reset", ids, lambda local, rows: (local, [seeds[r] for r in rows], options)
            )
            self._state = "reset"

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict[str, Any]]:
        with self._guard():
            self._require("reset", "reset_wait")
            replies = self._collect(timeout=timeout)
            self._state = "default"
            obs, _, _, _, infos, _ = self._results(replies, full=True)
            return obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        with self._guard():
            self._require("default", "step_async")
            put_rows(self._arrays.actions, None, actions)
            self._submit("step", np.arange(self.num_envs), lambda local, rows: local)
            self._state = "step"

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        with self._guard():
            self._require("step", "step_wait")
            replies = self._collect(timeout=timeout)
            self._state = "default"
            return self._results(replies, full=True)[:5]

    # --- partial stepping (EnvPool / seeds' step_send + step_recv) ---------------

    def send(self, actions: Any, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Step envs `env_ids` (all when None) with `actions`, batched in that order.

        Returns at once; `recv` returns the results. An env must not be in flight.
        """
        with self._guard():
            if self._state not in ("default", "partial"):
                self._require("default", "send")
            ids, ordered = checked_ids(env_ids, self.num_envs)
            if self._in_flight[ids].any():
                busy = ids[self._in_flight[ids]].tolist()
                raise AlreadyPendingCallError(
                    f"envs {busy} are still stepping; recv() their results before sending "
                    "them new actions",
                    "partial",
                )
            put_rows(self._arrays.actions, None if env_ids is None else ids, actions)
            self._submit("step", ordered, lambda local, rows: local)
            self._state = "partial"

    def recv(
        self, min_envs: int | None = None, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        """Results of envs sent with `send`, with their `env_ids` (ascending).

        Policies: both None -> wait for every env in flight; `min_envs=k` -> return
        once at least k envs are back; `timeout=t` -> block for the first worker, then
        also take those that finish within t seconds.
        Returns `(obs, rewards, terminations, truncations, infos, env_ids)`.
        """
        with self._guard():
            self._require("partial", "recv")
            replies = self._collect(min_envs=min_envs, window=timeout)
            if not self._in_flight.any():
                self._state = "default"
            return self._results(replies, full=False)

    @property
    def in_flight(self) -> np.ndarray:
        """Which envs are stepping now (sent, not yet returned by `recv`)."""
        return self._in_flight.copy()

    @property
    def reply_seconds(self) -> np.ndarray:
        """Per worker: seconds from the start of its latest answered command to the
        arrival of the answer (NaN before its first). After a wait-for-all `recv` these
        are the workers' step times of that round, measured while the caller waited."""
        return self._reply_seconds.copy()

    # --- calls, attributes, tasks ----------------------------------------------------

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        with self._guard():
            self._require("default", "call_async")
            self._submit("call", np.arange(self.num_envs), lambda local, rows: (name, args, kwargs))
            self._state = "call"

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        with self._guard():
            self._require("call", "call_wait")
            replies = self._collect(timeout=timeout)
            self._state = "default"
            return self._ordered(replies)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                f"got {len(values)} values for {self.num_envs} envs; pass one per "
                "env, or a single value (not a list) for all"
            )
        self._sync(
            "set_attr",
            np.arange(self.num_envs),
            lambda local, rows: (name, [values[r] for r in rows]),
        )

    def call_each(
        self, name: str, args: Sequence[Any], env_ids: Sequence[int] | np.ndarray | None = None
    ) -> tuple[Any, ...]:
        """Call method `name` on each env in `env_ids` (all when None) with its own argument."""
        ids, order = checked_ids(env_ids, self.num_envs)
        if len(args) != ids.size:
            raise ValueError(f"got {len(args)} arguments for {ids.size} envs")
        arg_of = {int(e): a for e, a in zip(ids, args, strict=True)}

        def payload(local: list[int] | None, rows: np.ndarray) -> Any:
            local_ids = local if local is not None else list(range(rows.size))
            return name, local_ids, [arg_of[int(r)] for r in rows]

        by_env = dict(zip(order.tolist(), self._sync("call_each", order, payload), strict=True))
        return tuple(by_env[int(e)] for e in ids)

    def reset_task(
        self, tasks: Sequence[Any], env_ids: Sequence[int] | np.ndarray | None = None
    ) -> None:
        """Meta-RL: give env `env_ids[i]` the task `tasks[i]` (its `reset_task(task)`)."""
        self.call_each("reset_task", tasks, env_ids)

    def render(self) -> tuple[Any, ...] | None:
        return self.call("render")

    def _sync(
        self, command: str, ids: np.ndarray, data: Callable[[list[int] | None, np.ndarray], Any]
    ) -> tuple[Any, ...]:
        with self._guard():
            self._require("default", command)
            self._submit(command, ids, data)
            return self._ordered(self._collect())

    @staticmethod
    def _ordered(replies: list[Reply]) -> tuple[Any, ...]:
        replies = sorted(replies, key=lambda r: int(r[0][0]))
        return tuple(item for _, payload in replies for item in (payload or []))

    # --- shutdown ------------------------------------------------------------------

    def close_extras(
        self, timeout: float | None = None, terminate: bool = False, **kwargs: Any
    ) -> None:
        """Stop the workers: ask, wait up to `timeout` s (default 2), then kill."""
        grace = 0.0 if terminate else (CLOSE_GRACE_S if timeout is None else timeout)
        self._transport.close(grace)
        self._state = "closed"

    def __del__(self) -> None:
        # Not getattr: gym's VectorEnv has a class attribute `closed = False`, so a
        # subclass constructor that raised before ours ran would "close" no transport.
        if not self.__dict__.get("closed", True):
            self.close(terminate=True)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_envs={self.num_envs}, num_workers={self.num_workers})"
