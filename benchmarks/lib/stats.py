"""Summaries of repeated measurements: median, min and max, with the samples kept
(shared machines are noisy; one number would hide how much). Tests of finals over
seeds are `pararl.stats`'s."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float
    samples: tuple[float, ...]


def summarize(samples: Sequence[float]) -> Summary:
    if not samples:
        raise ValueError("summarize needs at least one sample")
    return Summary(statistics.median(samples), min(samples), max(samples), tuple(samples))


def maybe(samples: Sequence[float]) -> Summary | None:
    return summarize(samples) if samples else None


def med(s: Summary | None) -> float | None:
    return None if s is None else s.median


def ratio(a: Summary | float | None, b: Summary | float | None) -> float | None:
    """a ÷ b of medians (or plain numbers); None when either is missing or b is 0."""
    x = a.median if isinstance(a, Summary) else a
    y = b.median if isinstance(b, Summary) else b
    return None if x is None or not y else x / y


def censored_median(values: Sequence[float]) -> float | None:
    """The median, a run that never got there counting as infinitely late; None when
    that median is infinite (or there is nothing)."""
    if not values:
        return None
    m = statistics.median(values)
    return None if math.isinf(m) else m
