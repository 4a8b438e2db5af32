"""Commands in flight to the workers of a vector env, and their replies.

Each worker has a queue of pending commands (the env ids each one covers); a reply
answers the oldest. Three waits collect replies: `wait_all` (every pending one),
`wait_envs` (until at least `min_envs` envs are back) and `wait_window` (the
first, then whatever else arrives within a window). They share one bounded step,
`_receive_next`: `worker_timeout` runs per worker from when it started on its
oldest command, so a hung worker is caught even while others reply; a dead
worker is reported at once; a caller's `timeout` ends `wait_all` with the call
still pending.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

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
        self.last_arrival = 0.0  # when the latest replies were received
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

    # --- the three wait policies ----------------------------------------------------

    def wait_all(
        self, worker_timeout: float | None, call: str, timeout: float | None = None
    ) -> list[Reply]:
        """Every pending reply. Past `timeout` s, `mp.TimeoutError`, with the call
        still pending (replies that came stay for the next wait)."""
        limit = None if timeout is None else CallLimit(call, timeout, time.monotonic() + timeout)
        while busy := self._busy():
            self._receive_next(busy, worker_timeout, limit=limit)
        return self._take()

    def wait_envs(self, worker_timeout: float | None, min_envs: int) -> list[Reply]:
        """Replies until at least `min_envs` envs are back (or none is pending)."""
        got = self._envs_back()
        while got < min_envs and (busy := self._busy()):
            got += self._receive_next(busy, worker_timeout)
        return self._take()

    def wait_window(
        self, worker_timeout: float | None, window: float, min_envs: int | None = None
    ) -> list[Reply]:
        """The first reply, then whatever else arrives within `window` s of it (of
        this call, if replies were already back); sooner once `min_envs` envs are
        back, if given."""
        first_at = time.monotonic() if self.arrived else None
        got = self._envs_back()
        while (busy := self._busy()) and (min_envs is None or got < min_envs):
            until = None if first_at is None else first_at + window
            if until is not None and time.monotonic() >= until:
                break
            got += self._receive_next(busy, worker_timeout, until=until)
            if first_at is None and self.arrived:
                first_at = self.last_arrival
        return self._take()

    # --- what every wait shares ------------------------------------------------------

    def _busy(self) -> list[int]:
        return [w for w, q in enumerate(self.pending) if q]

    def _envs_back(self) -> int:
        return sum(ids.size for ids, _ in self.arrived)

    def _take(self) -> list[Reply]:
        done, self.arrived = self.arrived, []
        return done

    def _receive_next(
        self,
        busy: list[int],
        worker_timeout: float | None,
        until: float | None = None,
        limit: CallLimit | None = None,
    ) -> int:
        """Wait until one of the `busy` workers replies, or the earliest deadline, then
        receive every reply that is ready; returns how many envs came back (0 once
        `until` has passed, or on an early wake-up).

        Every wait is bounded and checks the workers: past the caller's `limit`,
        `mp.TimeoutError`; the longest-busy worker past `worker_timeout`,
        `WorkerTimeoutError` with its index; a worker that died, the transport's
        `WorkerError` with its index and traceback."""
        stalled = min(busy, key=self.busy_since.__getitem__)
        stall_at = None if worker_timeout is None else self.busy_since[stalled] + worker_timeout
        deadlines = [
            t for t in (None if limit is None else limit.at, stall_at, until) if t is not None
        ]
        wait = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        ready = self.transport.ready(busy, wait)
        if ready:
            return self._receive(ready)
        now = time.monotonic()
        if limit is not None and now >= limit.at:
            raise limit.error()
        if stall_at is not None and now >= stall_at:
            raise self.transport.timeout_error(
                stalled, f"no reply within worker_timeout={worker_timeout} s; its env hangs"
            )
        return 0

    def _receive(self, ready: list[int]) -> int:
        """Take the next reply of each worker in `ready`; returns how many envs it covers."""
        arrived = self.last_arrival = time.monotonic()
        got = 0
        for w in ready:
            self.reply_seconds[w] = arrived - self.busy_since[w]
            payload = self.transport.receive(w)
            ids = self.pending[w].popleft()
            self.in_flight[ids] = False
            self.arrived.append((ids, payload))
            got += ids.size
            self.busy_since[w] = arrived  # on to its next command, if any
        return got


class CallLimit(NamedTuple):
    """A caller's bound on a wait: past `at` (monotonic s), the call to `call`
    times out after `seconds`."""

    call: str
    seconds: float
    at: float

    def error(self) -> mp.TimeoutError:
        return mp.TimeoutError(
            f"The call to `{self.call}` has timed out after {self.seconds} second(s). "
            f"(Still pending: call `{self.call}` again to keep waiting.)"
        )


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
