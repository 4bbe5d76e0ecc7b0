"""Tests for schedsteal.stats (reference values from textbook tables / scipy)."""

import math

import pytest
from schedsteal import stats

# Welch's t-test example (Wikipedia "Welch's t-test", example 2 data):
# scipy.stats.ttest_ind(A1, A2, equal_var=False) -> t=-2.4554, df=24.99, p=0.021378
A1 = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6,
      19.0, 21.7, 21.4]
A2 = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1,
      22.9, 20.5, 24.4]


def test_means():
    assert stats.amean([1, 2, 3, 4]) == 2.5
    assert stats.hmean([1, 2, 4]) == pytest.approx(3 / (1 + 0.5 + 0.25))
    assert stats.gmean([1, 4, 16]) == pytest.approx(4.0)
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.minimum([3, 1, 2]) == 1
    assert stats.maximum([3, 1, 2]) == 3
    # constant samples give the value back exactly
    assert stats.amean([0.1] * 7) == 0.1
    assert stats.hmean([0.1] * 7) == 0.1


def test_spread():
    assert stats.stddev([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(2.138089935)
    assert stats.variance([1, 2, 3, 4]) == pytest.approx(5 / 3)
    assert stats.stddev([5.0]) == 0.0
    assert stats.stddev([0.1, 0.1, 0.1]) == 0.0
    assert stats.coeffvar([1.0, 1.1, 0.9, 1.0, 1.0]) == pytest.approx(7.0710678)
    assert stats.coeffvar([3.0, 3.0]) == 0.0
    assert math.isnan(stats.coeffvar([-1.0, 1.0]))


def test_bad_input():
    with pytest.raises(ValueError):
        stats.amean([])
    with pytest.raises(ValueError):
        stats.hmean([1.0, 0.0])
    with pytest.raises(ValueError):
        stats.gmean([-1.0])


def test_t_distribution():
    assert stats.t_critical(10) == pytest.approx(2.228, abs=5e-4)
    assert stats.t_critical(1) == pytest.approx(12.706, abs=5e-3)
    assert stats.t_critical(30) == pytest.approx(2.042, abs=5e-4)
    assert stats.t_critical(5, 0.99) == pytest.approx(4.032, abs=5e-4)
    assert stats.t_sf2(2.228138852, 10) == pytest.approx(0.05, abs=1e-9)
    assert stats.t_sf2(0.0, 7) == 1.0
    assert stats.t_cdf(0.0, 3) == 0.5
    # df=1 is the Cauchy distribution: CDF(t) = 1/2 + atan(t)/pi
    for t in (-3.0, -0.5, 0.7, 10.0):
        assert stats.t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi,
                                                  abs=1e-12)
    # df=2: CDF(t) = 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-2.0, 0.3, 5.0):
        assert stats.t_cdf(t, 2) == pytest.approx(
            0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)


def test_betainc():
    assert stats.betainc(1, 1, 0.3) == pytest.approx(0.3)         # uniform
    assert stats.betainc(2, 2, 0.5) == pytest.approx(0.5)         # symmetric
    assert stats.betainc(2, 3, 0.4) == pytest.approx(0.5248)      # 6x^2-8x^3+3x^4
    assert stats.betainc(3, 1, 0.5) == pytest.approx(0.125)       # x^3
    assert stats.betainc(5, 5, 0.0) == 0.0
    assert stats.betainc(5, 5, 1.0) == 1.0


def test_welch_textbook():
    r = stats.welch_ttest(A1, A2)
    assert r.t == pytest.approx(-2.455356398, abs=1e-8)
    assert r.df == pytest.approx(24.98852929, abs=1e-6)
    assert r.p == pytest.approx(0.021378001, abs=1e-8)
    assert r.significant()
    assert not r.significant(alpha=0.01)


def test_welch_fixture_values():
    # scipy: p=0.0020773377 (t=4.4721, df=8) and p=0.8225812057
    r = stats.welch_ttest([1.0, 1.1, 0.9, 1.0, 1.0], [0.8, 0.9, 0.7, 0.8, 0.8])
    assert r.p == pytest.approx(0.0020773377, abs=1e-9)
    assert r.df == pytest.approx(8.0)
    r = stats.welch_ttest([2.0, 2.2, 1.8, 2.1, 1.9, 2.0],
                          [2.1, 1.9, 1.95, 2.15, 1.8])
    assert r.p == pytest.approx(0.8225812057, abs=1e-9)
    assert not r.significant()


def test_welch_degenerate():
    assert stats.welch_ttest([1.0], [2.0, 3.0]) == (None, None, None)
    assert stats.welch_ttest([], []).p is None
    assert not stats.welch_ttest([1.0], [5.0]).significant()
    same = stats.welch_ttest([0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.1])
    assert same.p == 1.0 and not same.significant()
    diff = stats.welch_ttest([1.0, 1.0, 1.0], [2.0, 2.0])
    assert diff.p == 0.0 and diff.significant()
    # one sample constant, the other not: still a proper test
    one = stats.welch_ttest([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    assert 0.0 < one.p < 1.0
    assert one.df == pytest.approx(2.0)


def test_confidence_interval():
    mean, half = stats.confidence_interval([1, 2, 3, 4])
    assert mean == 2.5
    assert half == pytest.approx(3.182446305 * math.sqrt(5 / 3) / 2)
    mean, half = stats.confidence_interval([7.0])
    assert mean == 7.0 and math.isnan(half)


def test_pct_improvement():
    assert stats.pct_improvement(1.234, 1.1, higher_is_better=False) == \
        pytest.approx(10.8590, abs=1e-4)
    assert stats.pct_improvement(100, 110, higher_is_better=True) == pytest.approx(10.0)
    assert stats.pct_improvement(100, 90, higher_is_better=True) == pytest.approx(-10.0)
    assert stats.pct_improvement(0.01, 0.02, higher_is_better=False) == pytest.approx(-100.0)
    assert stats.pct_improvement(0.0, 0.0, False) == 0.0
    assert stats.pct_improvement(0.0, 1.0, False) is None


def test_describe():
    d = stats.describe([100.0, 200.0], higher_is_better=True)
    assert d["mean_kind"] == "Hmean"
    assert d["mean"] == pytest.approx(400 / 3)
    assert d["amean"] == 150.0
    d = stats.describe([1.0, 2.0, 3.0])
    assert d["mean_kind"] == "Amean" and d["mean"] == 2.0 and d["n"] == 3
    assert d["median"] == 2.0 and d["min"] == 1.0 and d["max"] == 3.0


# Student's sleep data (Cushny & Peebles): R's t.test(x, y, paired=TRUE)
# gives t = -4.0621, df = 9, p-value = 0.002833.
SLEEP1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_paired_textbook():
    r = stats.paired_ttest(SLEEP1, SLEEP2)
    assert r.t == pytest.approx(-4.0621, abs=1e-4)
    assert r.df == 9
    assert r.p == pytest.approx(0.002833, abs=1e-6)
    assert r.significant()
    # same pairs in the other order: same p, t flips sign
    assert stats.paired_ttest(SLEEP2, SLEEP1).t == pytest.approx(4.0621, abs=1e-4)
    # unpaired, the same data is not significant: pairing removes the
    # subject-to-subject (here: run-to-run drift) variance
    assert not stats.welch_ttest(SLEEP1, SLEEP2).significant()


def test_paired_closed_form():
    # differences -1, -2, -3: t = -2 * sqrt(3), df = 2, where
    # P(|T| >= t) = 1 - t / sqrt(2 + t^2)
    r = stats.paired_ttest([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    t = 2 * math.sqrt(3)
    assert r.t == pytest.approx(-t) and r.df == 2
    assert r.p == pytest.approx(1 - t / math.sqrt(2 + t * t), abs=1e-12)


def test_paired_degenerate():
    assert stats.paired_ttest([1.0], [2.0]) == (None, None, None)
    assert stats.paired_ttest([], []).p is None
    with pytest.raises(ValueError, match="pairs"):
        stats.paired_ttest([1.0, 2.0], [1.0])
    same = stats.paired_ttest([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert same.p == 1.0 and not same.significant()
    shifted = stats.paired_ttest([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    assert shifted.p == 0.0 and shifted.significant()


def test_nan_p_is_never_significant():
    assert not stats.WelchResult(math.nan, math.nan, math.nan).significant()


def test_welch_and_paired_share_one_result_type():
    assert type(stats.paired_ttest([1.0, 2.0], [2.0, 4.0])) is \
        type(stats.welch_ttest([1.0, 2.0], [2.0, 4.0]))


def test_percentile_interpolates_between_ranks():
    vals = [4.0, 1.0, 3.0, 2.0]
    assert stats.percentile(vals, 0) == 1.0 and stats.percentile(vals, 100) == 4.0
    assert stats.percentile(vals, 50) == stats.median(vals) == 2.5
    assert stats.percentile(vals, 99) == pytest.approx(3.97)
    with pytest.raises(ValueError):
        stats.percentile([], 50)
