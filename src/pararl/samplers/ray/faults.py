"""What the learner does when a Ray actor dies or goes silent.

An actor created with `max_restarts` is restarted by Ray when its process or its
node dies; the requests it had in flight fail with `RayActorError`. The learner
then logs the event, keeps everything it already received, and sends the request
again with the current weights: Ray delivers it once the actor is back. An actor
that keeps dying is given up on after `max_deaths`. And since a lost node or a
partitioned network may fail nothing at all, every request has a deadline. An actor
whose constructor raised (a bad env, a missing package on its node) is not restarted
by Ray and would fail the same way again: that stops the run at once, with the
constructor's error.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ActorLostError(RuntimeError):
    """An actor died more often than allowed, or answered nothing for too long."""


def _raised(error: BaseException) -> str:
    """The exception a remote constructor raised, from Ray's error text (its last
    line names it, after the remote traceback), or the error's own first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    named = [line for line in lines if line.split(":", 1)[0].endswith(("Error", "Exception"))]
    return (named[-1] if named else lines[0] if lines else type(error).__name__)[:300]


class FaultBook:
    """Deaths per actor, actors being restarted, and the deadline of every request.

    While an actor restarts, every request to it may fail (those it had in flight,
    and those sent before it is back, as "unavailable"): the first failure counts
    as its death, the others until it answers again do not.
    """

    def __init__(self, report: Callable[[str], None], max_deaths: int, timeout_s: float) -> None:
        self.report, self.max_deaths, self.timeout_s = report, max_deaths, timeout_s
        self.deaths: dict[int, int] = {}
        self.restarting: dict[int, float] = {}  # actor -> when its death was seen

    def died(self, index: int, error: BaseException) -> None:
        """A request to actor `index` failed. Log a new death; raise once the actor
        has died more than `max_deaths` times, or has been restarting for too long,
        or at once when it died in its constructor."""
        if getattr(error, "actor_init_failed", False):  # Ray's RayActorError says so
            raise ActorLostError(
                f"Ray actor {index} failed while starting: {_raised(error)}"
            ) from error
        if index in self.restarting:
            self.check_deadline(index, self.restarting[index])
            return
        self.restarting[index] = time.monotonic()
        count = self.deaths[index] = self.deaths.get(index, 0) + 1
        text = str(error).strip()
        reason = text.splitlines()[0] if text else type(error).__name__
        if count > self.max_deaths:
            raise ActorLostError(
                f"Ray actor {index} died {count} times (last: {reason}); giving up"
            ) from error
        self.report(
            f"pararl: actor {index} died, restarted (death {count} of at most "
            f"{self.max_deaths}; {reason[:160]}); received data kept, current weights resent"
        )

    def answered(self, index: int) -> None:
        """Actor `index` delivered a result: it is up (again)."""
        self.restarting.pop(index, None)

    def check_deadline(self, index: int, sent_at: float) -> None:
        """Raise if the request sent to actor `index` at `sent_at` is overdue."""
        waited = time.monotonic() - sent_at
        if waited > self.timeout_s:
            raise ActorLostError(
                f"Ray actor {index} has not answered for {waited:.0f} s (--ray-timeout-s "
                f"{self.timeout_s:g}); is its node alive? (`ray status`)"
            )
