"""`pararl.stats`: against values worked by hand, against scipy (what rliable calls:
`trim_mean`, `mannwhitneyu`; rliable itself is no dependency), and properties that hold
for any scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pararl import stats
from pararl.stats import (
    bootstrap_ci,
    iqm,
    mann_whitney,
    mann_whitney_method,
    probability_of_improvement,
    probability_of_improvement_ci,
    smallest_p,
)

# --- by hand ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scores", "expect"),
    [
        ([5.0], 5.0),  # int(0.25 * 1) = 0 cut
        ([1.0, 3.0], 2.0),
        ([1.0, 2.0, 9.0], 4.0),  # 3 scores: none cut, the mean
        ([4.0, 1.0, 3.0, 2.0], 2.5),  # 1 cut from each end: (2 + 3) / 2
        ([1.0, 2.0, 3.0, 100.0], 2.5),  # the outlier is cut
        ([100.0, 4.0, 3.0, 2.0, 1.0], 3.0),  # 5: int(1.25) = 1 cut, (2 + 3 + 4) / 3
        ([float(v) for v in range(1, 9)], 4.5),  # 8: 2 cut, (3 + 4 + 5 + 6) / 4
        ([0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 10.0], 6.0),  # 7: 1 cut, (0 + 0 + 10 * 3) / 5
    ],
)
def test_iqm_by_hand(scores: list[float], expect: float) -> None:
    assert iqm(scores) == pytest.approx(expect)


def test_iqm_along_an_axis_is_each_row_s() -> None:
    rows = np.array([[4.0, 1.0, 3.0, 2.0], [1.0, 2.0, 3.0, 100.0], [8.0, 8.0, 8.0, 8.0]])
    np.testing.assert_allclose(iqm(rows, axis=-1), [2.5, 2.5, 8.0])
    np.testing.assert_allclose(iqm(rows.T, axis=0), [2.5, 2.5, 8.0])


def test_probability_of_improvement_by_hand() -> None:
    # 1 loses to both 2s, 2 ties both (half each), 3 beats both: 0 + 1 + 2 of 6 pairs
    assert probability_of_improvement([1, 2, 3], [2, 2]) == 0.5
    # 3 against 1, 2, 3: 1 + 1 + 0.5; 4 against them: 3; 5.5 of 6 pairs
    assert probability_of_improvement([3, 4], [1, 2, 3]) == 5.5 / 6
    assert probability_of_improvement([1, 2, 3], [3, 4]) == 0.5 / 6
    assert probability_of_improvement([7], [7]) == 0.5
    assert probability_of_improvement([1, 2], [3, 4]) == 0.0


def test_the_exact_distribution_of_u_by_hand() -> None:
    """2 scores against 3, no ties: the 10 orderings give U = 0..6 as 1, 1, 2, 2, 2, 1, 1
    (aabbb: 0; ababb: 1; abbab, baabb: 2; abbba, babab: 3; ...), 3 against 3 the 20 as
    1, 1, 2, 3, 3, 3, 3, 2, 1, 1."""
    assert stats._u_counts(2, 3) == [1, 1, 2, 2, 2, 1, 1]
    assert stats._u_counts(3, 2) == [1, 1, 2, 2, 2, 1, 1]
    assert stats._u_counts(3, 3) == [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]
    assert stats._u_counts(1, 4) == [1, 1, 1, 1, 1]
    for n, m in [(4, 7), (8, 8), (2, 30)]:
        counts = stats._u_counts(n, m)
        assert sum(counts) == math.comb(n + m, n)
        assert counts == counts[::-1]  # symmetric about n m / 2


def test_mann_whitney_exact_by_hand() -> None:
    # a entirely below b: U = 6 (of 2 * 3), P(U >= 6) = 1/10, two-sided 0.2
    assert mann_whitney_method([1, 2], [3, 4, 5]) == "exact"
    assert mann_whitney([1, 2], [3, 4, 5]) == pytest.approx(0.2)
    assert mann_whitney([3, 4, 5], [1, 2]) == pytest.approx(0.2)
    # a = 1, 3 against 2, 4, 5: U_a = 1 (3 > 2), the farther tail U = 5: (1 + 1) / 10, x 2
    assert mann_whitney([1, 3], [2, 4, 5]) == pytest.approx(0.4)
    # a = 1, 4 against 2, 3, 5: U_a = 2, U = 4: (2 + 1 + 1) / 10, x 2
    assert mann_whitney([1, 4], [2, 3, 5]) == pytest.approx(0.8)
    # the middle: U_a = 3 = n m / 2, P(U >= 3) = 6/10, doubled and capped at 1
    assert mann_whitney([1, 5], [2, 3, 4]) == 1.0
    # 3 against 3 apart: 2 of the 20 orderings are as far, 0.1
    assert mann_whitney([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)


def test_mann_whitney_normal_approximation_by_hand() -> None:
    """Ties: the normal approximation. a = 1, 1, 2 and b = 2, 3, 3 pooled rank 1.5, 1.5,
    3.5, 3.5, 5.5, 5.5; R_a = 6.5, U_a = 6.5 - 6 = 0.5, U = 9 - 0.5 = 8.5; three pairs
    of ties: sum(t^3 - t) = 18, variance 3 * 3 / 12 * (7 - 18 / 30) = 4.8; z = (8.5 - 4.5
    - 0.5) / sqrt(4.8)."""
    assert mann_whitney_method([1, 1, 2], [2, 3, 3]) == "asymptotic"
    z = (8.5 - 4.5 - 0.5) / math.sqrt(4.8)
    expect = math.erfc(z / math.sqrt(2))  # 2 P(N(0, 1) > z)
    assert mann_whitney([1, 1, 2], [2, 3, 3]) == pytest.approx(expect, rel=1e-12)
    assert expect == pytest.approx(0.1101, abs=1e-4)


def test_mann_whitney_of_scores_all_the_same_is_1() -> None:
    assert mann_whitney([3, 3, 3], [3, 3]) == 1.0
    assert mann_whitney([3], [3]) == 1.0


def test_which_method_mann_whitney_takes() -> None:
    """scipy's `method="auto"`: exact unless both have more than 8 scores, or a tie."""
    assert mann_whitney_method(range(8), range(100, 200)) == "exact"
    assert mann_whitney_method(range(9), range(100, 109)) == "asymptotic"
    assert mann_whitney_method([1, 2, 2], [3]) == "asymptotic"  # a tie within a side
    assert mann_whitney_method([1, 2], [2, 3]) == "asymptotic"  # and across


def test_smallest_p() -> None:
    assert smallest_p(3, 3) == pytest.approx(0.1)  # 2 / C(6, 3)
    assert smallest_p(4, 4) == pytest.approx(2 / 70)
    assert smallest_p(5, 5) == pytest.approx(2 / 252)
    assert smallest_p(1, 1) == 1.0
    assert smallest_p(10, 10) < 1e-3  # the normal approximation, both above 8


def test_bootstrap_is_the_percentiles_of_resampled_statistics() -> None:
    """The interval is numpy's percentiles of the statistic of each resample: the same
    draws, worked one resample at a time."""
    scores = np.array([3.0, 9.0, 1.0, 4.0, 4.5, 12.0, 7.0])
    reps = 999
    picks = np.random.default_rng(5).integers(0, scores.size, size=(reps, scores.size))
    each = [float(np.mean(np.sort(scores[p])[1:-1])) for p in picks]  # 7: 1 cut each end
    expect = np.percentile(each, [2.5, 97.5])
    got = bootstrap_ci(scores, iqm, reps=reps, confidence=0.95, rng=5)
    np.testing.assert_allclose(got, expect)
    # any statistic called as statistic(samples, axis=-1)
    means = [float(np.mean(scores[p])) for p in picks]
    np.testing.assert_allclose(
        bootstrap_ci(scores, np.mean, reps=reps, confidence=0.8, rng=5),
        np.percentile(means, [10, 90]),
    )


def test_probability_of_improvement_ci_resamples_each_side_on_its_own() -> None:
    """Each resample draws how many times it takes each run of a and of b (a multinomial
    count, as resampling with replacement); worked out pair by pair here."""
    a, b = np.array([3.0, 5.0, 5.0, 8.0]), np.array([4.0, 5.0, 1.0])
    reps = 500
    gen = np.random.default_rng(11)
    counts_a = gen.multinomial(a.size, np.full(a.size, 1 / a.size), size=reps)
    counts_b = gen.multinomial(b.size, np.full(b.size, 1 / b.size), size=reps)
    # b's counts are drawn over its scores sorted
    each = [
        probability_of_improvement(np.repeat(a, count_a), np.repeat(np.sort(b), count_b))
        for count_a, count_b in zip(counts_a, counts_b, strict=True)
    ]
    expect = np.percentile(each, [2.5, 97.5])
    got = probability_of_improvement_ci(a, b, reps=reps, rng=11)
    np.testing.assert_allclose(got, expect)


def test_bootstrap_is_reproducible_and_degenerate_where_nothing_varies() -> None:
    scores = [1.0, 5.0, 2.0, 8.0, 3.0]
    assert bootstrap_ci(scores, rng=3, reps=2000) == bootstrap_ci(scores, rng=3, reps=2000)
    assert bootstrap_ci([4.0, 4.0, 4.0], reps=100, rng=0) == (4.0, 4.0)
    assert bootstrap_ci([4.0], reps=100, rng=0) == (4.0, 4.0)
    assert probability_of_improvement_ci([2.0], [1.0], reps=100, rng=0) == (1.0, 1.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no scores"):
        iqm([])
    with pytest.raises(ValueError, match="finite"):
        mann_whitney([1.0, math.nan], [2.0])
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=1.0)
    with pytest.raises(ValueError, match="reps"):
        probability_of_improvement_ci([1.0], [2.0], reps=0)


# --- against scipy ---------------------------------------------------------------------


def _cases(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Samples of 1 to 14 scores each: continuous (no ties) and small integers (ties)."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(count):
        n, m = (int(k) for k in rng.integers(1, 15, size=2))
        if i % 2:
            a, b = rng.integers(0, 5, size=n), rng.integers(0, 5, size=m) + rng.integers(0, 2)
            cases.append((a.astype(float), b.astype(float)))
        else:
            cases.append((rng.normal(size=n) * 50, rng.normal(0.5, 1.0, size=m) * 50))
    return cases


def test_mann_whitney_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    cases = _cases(0, 400)
    # larger samples, both sides past the exact test's 8, with and without ties
    rng = np.random.default_rng(1)
    cases += [(rng.normal(size=30), rng.normal(0.3, size=25)) for _ in range(20)]
    cases += [(rng.integers(0, 10, 40).astype(float), rng.integers(2, 12, 33).astype(float))]
    cases += [(np.array([1.0, 2.0]), np.arange(3.0, 500.0))]  # exact, one side long
    methods = set()
    for a, b in cases:
        expect = scipy_stats.mannwhitneyu(a, b, alternative="two-sided").pvalue
        assert mann_whitney(a, b) == pytest.approx(expect, rel=1e-9, abs=1e-15), (a, b)
        methods.add(mann_whitney_method(a, b))
    assert methods == {"exact", "asymptotic"}


def test_probability_of_improvement_matches_scipy_u() -> None:
    """rliable's definition: mannwhitneyu(a, b, alternative="greater").statistic / (n m)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    for a, b in _cases(2, 100):
        u = scipy_stats.mannwhitneyu(a, b, alternative="greater").statistic
        assert probability_of_improvement(a, b) == pytest.approx(u / (a.size * b.size))


def test_iqm_matches_scipy_trim_mean() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for n in range(1, 40):
        x = rng.standard_exponential(n) * 100
        assert iqm(x) == pytest.approx(scipy_stats.trim_mean(x, 0.25))
    block = rng.normal(size=(6, 13))
    np.testing.assert_allclose(iqm(block, axis=-1), scipy_stats.trim_mean(block, 0.25, axis=-1))


# --- properties ------------------------------------------------------------------------

_scores = st.lists(
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), min_size=1, max_size=12
)
_few_values = st.lists(st.sampled_from([0.0, 1.0, 2.5, 500.0]), min_size=1, max_size=12)


@given(st.one_of(_scores, _few_values), st.one_of(_scores, _few_values))
def test_a_beats_b_and_b_beats_a_add_up_to_one(a: list[float], b: list[float]) -> None:
    assert probability_of_improvement(a, b) + probability_of_improvement(b, a) == pytest.approx(1)
    assert 0 <= probability_of_improvement(a, b) <= 1


@given(st.one_of(_scores, _few_values), st.one_of(_scores, _few_values))
def test_mann_whitney_is_a_two_sided_p_value(a: list[float], b: list[float]) -> None:
    p = mann_whitney(a, b)
    assert 0 < p <= 1
    assert p == pytest.approx(mann_whitney(b, a), rel=1e-12)
    assert p >= smallest_p(len(a), len(b)) or mann_whitney_method(a, b) == "asymptotic"


@given(st.one_of(_scores, _few_values), st.floats(0.01, 100), st.floats(-1e3, 1e3))
def test_iqm_lies_between_min_and_max_and_follows_units(
    scores: list[float], scale: float, shift: float
) -> None:
    value = iqm(scores)
    assert min(scores) - 1e-9 * abs(min(scores)) <= value
    assert value <= max(scores) + 1e-9 * abs(max(scores))
    moved = iqm([scale * s + shift for s in scores])
    assert moved == pytest.approx(scale * value + shift, rel=1e-9, abs=1e-6 * (1 + abs(value)))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.one_of(_scores, _few_values), st.one_of(_scores, _few_values))
def test_intervals_are_ordered_within_range_and_hold_the_estimate(
    a: list[float], b: list[float]
) -> None:
    """A percentile interval lies within the range the statistic takes over resamples:
    an IQM's within the scores', P(A > B)'s within [0, 1]. That it holds the estimate
    is not a theorem of percentile intervals; it holds for these two statistics on every
    sample tried (derandomized: the same samples each run)."""
    lo, hi = bootstrap_ci(a, iqm, reps=2000, rng=0)
    tol = 1e-9 * max(1.0, *map(abs, a))
    assert min(a) - tol <= lo <= hi <= max(a) + tol
    assert lo - tol <= iqm(a) <= hi + tol
    lo, hi = probability_of_improvement_ci(a, b, reps=2000, rng=0)
    assert 0 <= lo <= hi <= 1
    assert lo - 1e-12 <= probability_of_improvement(a, b) <= hi + 1e-12
