"""Commands in flight to the workers of a vector env, and their replies.

Each worker has a queue of pending commands (the env ids each one covers); a reply
answers the oldest. `collect` waits for replies under one of three policies (all
pending; at least `min_envs` envs back; the first, then whatever else arrives
within a window) and never blocks without a bound: `worker_timeout` runs per
worker from when it started on its oldest command, so a hung worker is caught
even while others reply, and a caller's `timeout` ends the wait with the call
still pending.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from pararl.vector.errors import WorkerTimeoutError
from pararl.vector.transport import Transport

Reply = tuple[np.ndarray, Any]  # (global env ids of a command, the worker's payload)


class Commands:
    """What is in flight to `transport`'s workers, for a batch of `num_envs` envs."""

    def __init__(self, transport: Transport, num_envs: int) -> None:
        self.transport = transport
        self.num_envs = num_envs
        slices = transport.slices
        # Where each worker's rows start, and the end: cuts sorted ids by worker.
        self.worker_starts = np.array([r.start for r in slices] + [num_envs])
        self.worker_rows = [np.arange(r.start, r.stop) for r in slices]
        self.pending: list[deque[np.ndarray]] = [deque() for _ in slices]
        # When each worker started on its oldest pending command.
        self.busy_since = [0.0] * len(slices)
        # Seconds each worker took for its latest reply (start of its command to the
        # reply's arrival here): free per-worker step times for recv policies.
        self.reply_seconds = np.full(len(slices), np.nan)
        self.arrived: list[Reply] = []  # replies received but not yet returned
        self.in_flight = np.zeros(num_envs, dtype=np.bool_)

    def submit(
        self, command: str, ids: np.ndarray, data: Callable[[list[int] | None, np.ndarray], Any]
    ) -> None:
        """Send `command` to the worker of every env in `ids` (ascending, unique);
        `data(local_ids, rows)` builds a worker's payload from its envs' local ids
        (None: all of them, in order) and global rows."""
        now = time.monotonic()
        if ids.size == self.num_envs:  # the hot path: every worker takes all its envs
            for w, rows in enumerate(self.worker_rows):
                self.transport.submit(w, command, data(None, rows))
                if not self.pending[w]:
                    self.busy_since[w] = now
                self.pending[w].append(rows)
            self.in_flight[:] = True
            return
        cuts = np.searchsorted(ids, self.worker_starts).tolist()
        for w, rows in enumerate(self.worker_rows):
            mine = ids[cuts[w] : cuts[w + 1]]
            if mine.size:
                whole = mine.size == rows.size  # ids are unique, so these are all its envs
                local = None if whole else (mine - rows[0]).tolist()
                self.transport.submit(w, command, data(local, mine))
                if not self.pending[w]:
                    self.busy_since[w] = now
                self.pending[w].append(mine)
                self.in_flight[mine] = True

    def collect(
        self,
        worker_timeout: float | None,
        call: str,
        min_envs: int | None = None,
        window: float | None = None,
        timeout: float | None = None,
    ) -> list[Reply]:
        """Wait for replies: all pending ones; or until `min_envs` envs are back; or
        for the first, then whatever else arrives within `window` seconds."""
        start = time.monotonic()
        first_at: float | None = None if not self.arrived else start
        got = sum(ids.size for ids, _ in self.arrived)
        while True:
            busy = [w for w, q in enumerate(self.pending) if q]
            if not busy or (min_envs is not None and got >= min_envs):
                break
            now = time.monotonic()
            if window is not None and first_at is not None and now >= first_at + window:
                break
            stalled = min(busy, key=self.busy_since.__getitem__)
            stall_deadline = (
                None if worker_timeout is None else self.busy_since[stalled] + worker_timeout
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
            ready = self.transport.ready(busy, wait)
            if ready:
                arrived = time.monotonic()
                for w in ready:
                    self.reply_seconds[w] = arrived - self.busy_since[w]
                    payload = self.transport.receive(w)
                    ids = self.pending[w].popleft()
                    self.in_flight[ids] = False
                    self.arrived.append((ids, payload))
                    got += ids.size
                    self.busy_since[w] = arrived  # on to its next command, if any
                first_at = first_at or arrived
                continue
            now = time.monotonic()
            if timeout is not None and now >= start + timeout:
                raise mp.TimeoutError(
                    f"The call to `{call}` has timed out after {timeout} second(s). "
                    f"(Still pending: call `{call}` again to keep waiting.)"
                )
            if stall_deadline is not None and now >= stall_deadline:
                raise WorkerTimeoutError(
                    stalled,
                    f"no reply within worker_timeout={worker_timeout} s; its env hangs",
                )
        done, self.arrived = self.arrived, []
        return done


def returned_rows(replies: list[Reply]) -> tuple[np.ndarray, np.ndarray | slice]:
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
