"""Rates over a sliding window of recent samples."""

from __future__ import annotations

import time
from collections import deque


class RateMeter:
    """Events per second over the last `window_s` seconds, measured from a count
    that rises. No rate (None) until the count has risen once: a run whose first
    data has not arrived yet (64 actors still starting) is not running at 0 steps/s.
    When the count stalls, the window keeps the last point before its last rise,
    so the rate falls as the stall lasts but never reads 0 for a live run."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, float]] = deque()

    @property
    def started(self) -> bool:
        """Whether a first point is in (the rate counts from it)."""
        return bool(self._points)

    def update(self, total: float, now: float | None = None) -> float | None:
        now = time.monotonic() if now is None else now
        points = self._points
        if len(points) >= 2 and points[-2][1] == points[-1][1] == total:
            points[-1] = (now, total)  # a stall: one point marks where it began
        else:
            points.append((now, total))
        # drop what is older than the window, as long as a lower count stays in it
        while len(points) > 2 and now - points[0][0] > self.window_s and points[1][1] < total:
            points.popleft()
        (t0, c0), (t1, c1) = points[0], points[-1]
        return (c1 - c0) / (t1 - t0) if c1 > c0 and t1 > t0 else None
