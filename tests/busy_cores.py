"""A thread governor that sees busy cores, deterministically: for the tests that check
how a runner wires `pararl.mp.threads.AdaptiveThreads` (its count reaching the update,
and metrics.csv), without timing anything."""

from __future__ import annotations

import itertools
from typing import Any

from pararl.mp.threads import AdaptiveThreads, Probing

SLOWER_ON_SEVERAL = 20.0  # an update on several threads looks this much slower than on one


class BusyCores(AdaptiveThreads):
    """Every update takes 1 s on one thread and 20 s on several (as beside another run
    on the same cores), in windows of one update; its clock advances a second at each
    reading, so the first probe comes at the first update and each later one twice as
    late as the last."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        ticks = itertools.count()
        settings = Probing(
            window_s=1e-9, first_probe_s=1.0, probe_s=1.0, clock=lambda: float(next(ticks))
        )
        super().__init__(*args, **{**kwargs, "settings": settings})

    def record(self, updates: int, seconds: float) -> None:
        super().record(updates, updates * (SLOWER_ON_SEVERAL if self.threads > 1 else 1.0))


def assert_moved_to_one(threads_seen: list[int]) -> None:
    """The updates' thread counts in order: several for the first, one for the next,
    and one for most of the rest (several again only in the governor's probes)."""
    assert threads_seen[0] > 1, threads_seen
    assert threads_seen[1] == 1, threads_seen
    assert threads_seen.count(1) > 2 * sum(t > 1 for t in threads_seen[1:]), threads_seen
