"""What the learner does when a Ray actor dies or goes silent.

An actor created with `max_restarts` is restarted by Ray when its process or its
node dies; the requests it had in flight fail with `RayActorError`. The learner
then logs the event, keeps everything it already received, and sends the request
again with the current weights: Ray delivers it once the actor is back. An actor
that keeps dying is given up on after `max_deaths`. And since a lost node or a
partitioned network may fail nothing at all, every request has a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ActorLostError(RuntimeError):
    """An actor died more often than allowed, or answered nothing for too long."""


class FaultBook:
    """Deaths per actor, and the deadline of every request in flight."""

    def __init__(self, report: Callable[[str], None], max_deaths: int, timeout_s: float) -> None:
        self.report, self.max_deaths, self.timeout_s = report, max_deaths, timeout_s
        self.deaths: dict[int, int] = {}
        self._last_death: dict[int, float] = {}  # when each actor's death was seen

    def died(self, index: int, error: BaseException, sent_at: float) -> None:
        """Log a death; raise once the actor has died more than `max_deaths` times.
        A failed request sent before the last death seen was lost in that death
        (an actor has several requests in flight): it is not counted again."""
        if sent_at < self._last_death.get(index, -1.0):
            return
        self._last_death[index] = time.monotonic()
        count = self.deaths[index] = self.deaths.get(index, 0) + 1
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if count > self.max_deaths:
            raise ActorLostError(
                f"Ray actor {index} died {count} times (last: {reason}); giving up"
            ) from error
        self.report(
            f"pararl: actor {index} died, restarted (death {count} of at most "
            f"{self.max_deaths}; {reason[:160]}); received data kept, current weights resent"
        )

    def check_deadline(self, index: int, sent_at: float) -> None:
        """Raise if the request sent to actor `index` at `sent_at` is overdue."""
        waited = time.monotonic() - sent_at
        if waited > self.timeout_s:
            raise ActorLostError(
                f"Ray actor {index} has not answered for {waited:.0f} s (--ray-timeout-s "
                f"{self.timeout_s:g}); is its node alive? (`ray status`)"
            )
