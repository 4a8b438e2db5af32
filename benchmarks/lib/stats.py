"""Summaries of repeated measurements: median, min and max, with the samples kept
(shared machines are noisy; one number would hide how much); whether two sets of
seeds differ (Mann-Whitney)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    """Median, min and max of repeated measurements, with the samples kept."""

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


EVERY_SPLIT = 200_000  # with ties, the most splits `mann_whitney` goes through one by one


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The two-sided Mann-Whitney U test's p-value of `a` against `b` (None: either is
    empty), exact: without ties from the U statistic's own distribution (scipy's), with
    ties from every split of the pooled values into two sets of those sizes (more than
    `EVERY_SPLIT` of them: scipy's normal approximation, corrected for ties). scipy
    comes with MinAtar (`pip install .[minatar]`)."""
    if not a or not b:
        return None
    from scipy.stats import mannwhitneyu

    if len(set(a) | set(b)) == len(a) + len(b):
        method = "exact"
    elif math.comb(len(a) + len(b), len(a)) <= EVERY_SPLIT:
        return every_split(a, b)
    else:
        method = "asymptotic"
    return float(mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def every_split(a: Sequence[float], b: Sequence[float]) -> float:
    """The share of the splits of `a` and `b` pooled into sets of their sizes whose U
    (from midranks: tied values share their mean rank) is at least as far from its
    mean as `a`'s own: the exact two-sided p-value, ties and all."""
    pooled = [*a, *b]
    ranks = [sum(x > y for y in pooled) + (sum(x == y for y in pooled) + 1) / 2 for x in pooled]
    n, centre = len(a), len(a) * len(b) / 2

    def distance(members: Sequence[int]) -> float:
        return abs(sum(ranks[i] for i in members) - n * (n + 1) / 2 - centre)

    seen = distance(range(n))
    splits = list(itertools.combinations(range(len(pooled)), n))
    return sum(distance(s) >= seen - 1e-9 for s in splits) / len(splits)


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p-value Mann-Whitney can give for `n` values against `m`:
    every one of one set above every one of the other, 2 of the C(n + m, n) ways to
    split them (3 seeds against 3: 0.1, so it can never say p < 0.05)."""
    return min(1.0, 2 / math.comb(n + m, n)) if n and m else 1.0


__all__ = [
    "Summary",
    "censored_median",
    "every_split",
    "mann_whitney",
    "maybe",
    "med",
    "ratio",
    "smallest_p",
    "summarize",
]
