"""Statistics of scores over runs, for comparing two algorithms (or two ways of running
one) by their final returns, one score per run (seed, agent).

What "Deep Reinforcement Learning at the Edge of the Statistical Precipice" (Agarwal
et al., NeurIPS 2021) recommends, as its library rliable computes it for one task:

- `iqm`: the interquartile mean, rliable's `metrics.aggregate_iqm`, which is
  `scipy.stats.trim_mean(scores, proportiontocut=0.25, axis=None)`: sorted, `int(0.25 n)`
  scores cut from each end, the mean of the rest.
- `bootstrap_ci`: a percentile bootstrap over runs: resample the runs with replacement
  `reps` times, take the statistic of each resample, and report the `(1 - confidence) / 2`
  and `(1 + confidence) / 2` percentiles of those (numpy's linear interpolation). This
  is rliable's `library.get_interval_estimates` with its defaults (`method="percentile"`,
  `reps=50000`, `confidence_interval_size=0.95`) on one task, where its stratified
  bootstrap is a plain bootstrap over runs (arch's `IIDBootstrap.conf_int`, which takes
  `np.percentile` of the bootstrap estimates).
- `probability_of_improvement`: P(X_a > X_b) + 0.5 P(X_a = X_b) for a run of each drawn
  at random, over all pairs: rliable's `metrics.probability_of_improvement` for one task,
  the Mann-Whitney U statistic over `n_a * n_b`; `probability_of_improvement_ci`
  resamples each side's runs independently (rliable's `StratifiedIndependentBootstrap`).
- `mann_whitney`: the two-sided Mann-Whitney U test's p-value, as
  `scipy.stats.mannwhitneyu(a, b, alternative="two-sided", use_continuity=True,
  method="auto")` computes it: the exact distribution of U when either sample has at most
  8 values and no value is tied, otherwise the normal approximation with the tie
  correction and the continuity correction.

NumPy only: neither rliable (it brings arch, seaborn and pandas) nor scipy is a
dependency of pararl. The tests check these functions against values worked by hand and
against scipy's `trim_mean` and `mannwhitneyu`, which rliable itself calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

Statistic = Callable[..., Any]
"""A statistic of a sample, called as `statistic(samples, axis=-1)` on a 2-D array of
resamples (one per row) and returning one value per row: `np.mean`, `np.median` and
`iqm` are such."""

Rng = np.random.Generator | int | None
"""A generator, or the seed of one (`np.random.default_rng`; None: a fresh one)."""

REPS = 50_000  # rliable's bootstrap replications (`get_interval_estimates`)
CONFIDENCE = 0.95
EXACT_MAX = 8  # mannwhitneyu(method="auto"): exact while the smaller sample is this or less
_CHUNK = 1 << 20  # resampled values held at once by a bootstrap


def scores_of(scores: ArrayLike) -> NDArray[np.float64]:
    """`scores` as a 1-D float array, refused (ValueError) if empty or not finite."""
    array = np.asarray(scores, dtype=np.float64).reshape(-1)
    if array.size == 0:
        raise ValueError("no scores")
    if not np.isfinite(array).all():
        raise ValueError("scores must be finite numbers")
    return array


@overload
def iqm(scores: ArrayLike) -> float: ...


@overload
def iqm(scores: ArrayLike, axis: int) -> NDArray[np.float64]: ...


def iqm(scores: ArrayLike, axis: int | None = None) -> float | NDArray[np.float64]:
    """The interquartile mean: the mean of the scores left once `int(0.25 n)` of the
    lowest and as many of the highest are cut (`scipy.stats.trim_mean(scores, 0.25)`,
    rliable's `aggregate_iqm`). `axis=None`: of all the scores, as one float; an axis:
    along it, one per slice (as the bootstrap calls it)."""
    if axis is None:
        return float(iqm(scores_of(scores), -1))
    array = np.moveaxis(np.asarray(scores, dtype=np.float64), axis, -1)
    n = array.shape[-1]
    if n == 0:
        raise ValueError("no scores")
    cut = int(0.25 * n)
    kept = np.partition(array, (cut, n - cut - 1), axis=-1)[..., cut : n - cut]
    return np.asarray(kept.mean(axis=-1), dtype=np.float64)


def bootstrap_ci(
    scores: ArrayLike,
    statistic: Statistic = iqm,
    reps: int = REPS,
    confidence: float = CONFIDENCE,
    rng: Rng = None,
) -> tuple[float, float]:
    """The percentile bootstrap confidence interval of `statistic` over runs: `reps`
    resamples of the scores drawn with replacement (as many as there are), the
    statistic of each, and the `(1 - confidence) / 2` and `(1 + confidence) / 2`
    percentiles of those (rliable's default interval for one task; the module
    docstring). `statistic` is called as `statistic(resamples, axis=-1)`."""
    values = scores_of(scores)
    _check(reps, confidence)
    gen = np.random.default_rng(rng)
    n = values.size
    chunk = max(1, _CHUNK // n)
    estimates = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, chunk):
        rows = min(chunk, reps - start)
        picks = gen.integers(0, n, size=(rows, n))
        estimates[start : start + rows] = statistic(values[picks], axis=-1)
    return _percentiles(estimates, confidence)


def probability_of_improvement(a: ArrayLike, b: ArrayLike) -> float:
    """P(X_a > X_b) + 0.5 P(X_a = X_b), X_a a score of `a` and X_b one of `b` drawn at
    random: over all `n_a * n_b` pairs, the share that `a` wins, ties counting half
    (rliable's `probability_of_improvement` for one task: Mann-Whitney's U_a over
    `n_a * n_b`). `probability_of_improvement(b, a)` is one minus it."""
    x, y = scores_of(a), scores_of(b)
    return _wins(x, y) / (x.size * y.size)


def probability_of_improvement_ci(
    a: ArrayLike,
    b: ArrayLike,
    reps: int = REPS,
    confidence: float = CONFIDENCE,
    rng: Rng = None,
) -> tuple[float, float]:
    """The percentile bootstrap confidence interval of `probability_of_improvement(a,
    b)`: each side's runs resampled on their own (rliable's
    `StratifiedIndependentBootstrap`), `reps` times."""
    x, y = scores_of(a), np.sort(scores_of(b))
    _check(reps, confidence)
    gen = np.random.default_rng(rng)
    n, m = x.size, y.size
    # a resample is how many times it drew each run: its pairs are counted from the
    # original scores, weighted by those counts (y sorted: the b-runs below each a-run
    # are a prefix, and its count a cumulative sum)
    below = np.searchsorted(y, x, side="left")
    at_or_below = np.searchsorted(y, x, side="right")
    chunk = max(1, _CHUNK // (n + m))
    estimates = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, chunk):
        rows = min(chunk, reps - start)
        count_a = gen.multinomial(n, np.full(n, 1 / n), size=rows)
        count_b = gen.multinomial(m, np.full(m, 1 / m), size=rows)
        cumulative = np.zeros((rows, m + 1), dtype=np.int64)
        np.cumsum(count_b, axis=1, out=cumulative[:, 1:])
        wins = (cumulative[:, below] + cumulative[:, at_or_below]) / 2
        estimates[start : start + rows] = (count_a * wins).sum(axis=1) / (n * m)
    return _percentiles(estimates, confidence)


def mann_whitney(a: ArrayLike, b: ArrayLike) -> float:
    """The two-sided p-value of the Mann-Whitney U test of `a` against `b` (is one
    likelier to score higher than the other?), as `scipy.stats.mannwhitneyu(a, b,
    alternative="two-sided")` gives it (`method="auto"`, `use_continuity=True`): from
    the exact distribution of U without ties when either sample has at most
    `EXACT_MAX` scores (`mann_whitney_method`), else from the normal approximation
    with the tie correction and the continuity correction.

    Mann and Whitney, "On a test of whether one of two random variables is
    stochastically larger than the other", Ann. Math. Statist. 18 (1947); the tie
    correction as in scipy's reference, Wikipedia's "Mann-Whitney U test: Normal
    approximation and tie correction"."""
    x, y = scores_of(a), scores_of(b)
    n, m = x.size, y.size
    u_a = _wins(x, y)
    u = max(u_a, n * m - u_a)  # the farther tail, doubled: two-sided
    if mann_whitney_method(x, y) == "exact":
        counts = _u_counts(n, m)
        tail = Fraction(sum(counts[int(u) :]), sum(counts))
        return min(1.0, float(2 * tail))
    pooled = np.concatenate([x, y])
    ties = np.unique(pooled, return_counts=True)[1].astype(np.float64)
    total = n + m
    tie_term = float(np.sum(ties**3 - ties)) / (total * (total - 1))
    variance = n * m / 12 * ((total + 1) - tie_term)
    if variance <= 0:  # every score the same: nothing tells the sides apart
        return 1.0
    z = (u - n * m / 2 - 0.5) / math.sqrt(variance)
    return min(1.0, math.erfc(z / math.sqrt(2)))  # 2 * P(N(0, 1) > z)


def mann_whitney_method(a: ArrayLike, b: ArrayLike) -> Literal["exact", "asymptotic"]:
    """How `mann_whitney` computes its p-value for these samples (scipy's
    `method="auto"`): `exact` when either has at most `EXACT_MAX` scores and no
    score of either is tied with another, else `asymptotic` (the normal
    approximation)."""
    x, y = scores_of(a), scores_of(b)
    if x.size > EXACT_MAX and y.size > EXACT_MAX:
        return "asymptotic"
    if np.unique(np.concatenate([x, y])).size < x.size + y.size:
        return "asymptotic"
    return "exact"


def smallest_p(n: int, m: int) -> float:
    """The smallest p-value `mann_whitney` can give for `n` scores against `m`, none
    tied: every one of one side above every one of the other. With the exact test,
    2 of the C(n + m, n) ways to split the scores: 3 against 3 give 0.1 at best, and
    can never show a difference at 0.05."""
    if n < 1 or m < 1:
        raise ValueError("each side needs at least one score")
    return mann_whitney(np.arange(n), np.arange(n, n + m))


def _wins(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """Mann-Whitney's U for `x`: the pairs (one of `x`, one of `y`) that `x` wins,
    ties counting half."""
    ys = np.sort(y)
    below = np.searchsorted(ys, x, side="left")
    at_or_below = np.searchsorted(ys, x, side="right")
    return float(np.sum(below + at_or_below)) / 2


def _u_counts(n: int, m: int) -> list[int]:
    """How many of the C(n + m, n) orderings of `n` scores against `m` (no ties) give
    U = 0, 1, ..., n m: the coefficients of the Gaussian binomial coefficient
    [n + m choose n]_q = prod_{i=1..n} (1 - q^(m + i)) / (1 - q^i), as exact integers."""
    n, m = min(n, m), max(n, m)
    size = n * m + 1
    coeffs = np.zeros(size, dtype=object)
    coeffs[:] = 0
    coeffs[0] = 1
    for i in range(1, n + 1):
        shift = m + i
        if shift < size:  # times (1 - q^shift)
            coeffs[shift:] = coeffs[shift:] - coeffs[:-shift]
        # over (1 - q^i): a running sum over each residue class mod i (past the degree
        # n m, nothing is kept: what lies below it does not depend on what lies above)
        padded = np.zeros(-(-size // i) * i, dtype=object)
        padded[:] = 0
        padded[:size] = coeffs
        coeffs = np.cumsum(padded.reshape(-1, i), axis=0).reshape(-1)[:size]
    return [int(c) for c in coeffs]


def _check(reps: int, confidence: float) -> None:
    if reps < 1:
        raise ValueError(f"reps must be >= 1, not {reps}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")


def _percentiles(estimates: NDArray[np.float64], confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2
    low, high = np.percentile(estimates, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


__all__ = [
    "CONFIDENCE",
    "EXACT_MAX",
    "REPS",
    "Rng",
    "Statistic",
    "bootstrap_ci",
    "iqm",
    "mann_whitney",
    "mann_whitney_method",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "scores_of",
    "smallest_p",
]
