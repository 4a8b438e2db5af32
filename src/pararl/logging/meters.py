"""Rates over a sliding window of recent samples."""

from __future__ import annotations

import time
from collections import deque


class RateMeter:
    """Events per second over the last `window_s` seconds."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, float]] = deque()

    @property
    def started(self) -> bool:
        """Whether a first point is in (the rate counts from it)."""
        return bool(self._points)

    def update(self, total: float, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        self._points.append((now, total))
        while len(self._points) > 2 and now - self._points[0][0] > self.window_s:
            self._points.popleft()
        (t0, c0), (t1, c1) = self._points[0], self._points[-1]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else 0.0
