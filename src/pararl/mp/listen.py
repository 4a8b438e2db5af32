"""How a worker waits for its next command: a short, self-limiting spin, then a
blocking poll.

A worker that blocks in `poll` after each reply sleeps its core; on a virtual
machine waking it costs 50-300 µs, which is most of the round-trip overhead of
a vector step whose envs take ~1 ms. When commands have been following replies
closely (the caller steps in a tight loop), the worker instead polls without
blocking for a little longer than the recent gap, yielding its core to any
runnable process between polls. When the caller takes longer than `spin_s`
between steps (a large network's forward pass, a training phase), the worker
does not spin at all, so it never takes CPU time the caller needs.
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection

SPIN_S = 5e-4  # default longest spin: spinning pays only for gaps this short
_GAP_WEIGHT = 0.25  # weight of the newest gap in the running estimate
_SPIN_MARGIN = 2.0  # spin this many times the estimated gap ...
_SPIN_FLOOR_S = 1e-4  # ... but at least this long (the gap jitters)
_yield = getattr(os, "sched_yield", lambda: None)  # Unix; elsewhere a plain spin


class CommandWait:
    """Waits on `conn` for the next command, spinning when that is likely to pay."""

    def __init__(self, conn: Connection, spin_s: float = SPIN_S) -> None:
        self.conn = conn
        self.spin_s = spin_s
        self.gap = 0.0  # running estimate of reply-to-next-command time, seconds
        self.spins = 0  # waits answered while spinning (for tests and tuning)

    def budget(self) -> float:
        """Seconds the next wait will spin before blocking."""
        if self.spin_s <= 0 or self.gap >= self.spin_s:
            return 0.0
        return min(self.spin_s, max(_SPIN_FLOOR_S, _SPIN_MARGIN * self.gap))

    def wait(self, timeout: float) -> bool:
        """True when a command is waiting, after at most about `timeout` s."""
        start = time.perf_counter()
        arrived = self._spin(start + self.budget()) or self.conn.poll(timeout)
        if arrived:
            # Long idle spells are clipped, so one of them does not stop spinning
            # for many steps once the caller is back in a tight loop.
            gap = min(time.perf_counter() - start, 4 * self.spin_s)
            self.gap += _GAP_WEIGHT * (gap - self.gap)
        return arrived

    def _spin(self, until: float) -> bool:
        poll, clock = self.conn.poll, time.perf_counter
        while clock() < until:
            if poll(0):
                self.spins += 1
                return True
            _yield()
        return False
