"""The rate meter: no rate before the count first rises (a run whose actors are still
starting is not running at 0 steps/s), and a stall lowers the rate, never to 0."""

from __future__ import annotations

import pytest

from pararl.logging.meters import RateMeter


def test_no_rate_until_the_count_rises() -> None:
    meter = RateMeter(window_s=10.0)
    assert meter.update(0, now=0.0) is None
    assert meter.update(0, now=2.0) is None  # 64 actors, none has delivered yet
    assert meter.update(0, now=4.0) is None
    assert meter.update(800, now=5.0) == pytest.approx(160.0)  # counted from the start


def test_a_stall_lowers_the_rate_but_never_to_zero() -> None:
    meter = RateMeter(window_s=10.0)
    for t in range(11):
        meter.update(100 * t, now=float(t))
    rates = [meter.update(1000, now=10.0 + dt) for dt in (5.0, 20.0, 100.0)]
    assert all(r is not None and r > 0 for r in rates)
    assert rates == sorted(rates, reverse=True)
    assert len(meter._points) <= 13  # a stall adds no points


def test_the_window_slides_while_the_count_rises() -> None:
    meter = RateMeter(window_s=10.0)
    for t in range(30):
        meter.update(100 * t if t < 20 else 1900 + 10 * (t - 19), now=float(t))
    assert meter.update(2010, now=30.0) == pytest.approx(10.0, rel=0.05)  # the recent rate
