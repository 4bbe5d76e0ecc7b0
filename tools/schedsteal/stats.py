"""Small statistics toolkit for benchmark comparisons (standard library only).

Runs on a bare ``python3`` (inside the test guest as well as on the host), so
nothing here may import numpy or scipy.  Student's t distribution is computed
from the regularized incomplete beta function, evaluated with a continued
fraction (modified Lentz method).

Examples::

    >>> from schedsteal import stats
    >>> stats.amean([1.0, 2.0, 3.0])
    2.0
    >>> round(stats.t_critical(10), 3)          # two-sided 95%, df=10
    2.228
    >>> r = stats.welch_ttest([1.0, 1.1, 0.9], [2.0, 2.1, 1.9])
    >>> r.p < 0.05
    True
    >>> stats.pct_improvement(2.0, 1.5, higher_is_better=False)
    25.0

Conventions:

* descriptive functions raise ``ValueError`` on empty input (and ``hmean`` /
  ``gmean`` on values <= 0);
* ``stddev`` is the sample standard deviation and is 0.0 for a single value;
* ``welch_ttest`` never raises: with fewer than two values in a sample it
  returns ``p=None`` ("cannot tell"); with zero variance in both samples the
  p-value is 1.0 when the means are equal and 0.0 when they differ;
* ``paired_ttest`` is the same test on the per-pair differences (one
  sample), with the same result type and the same degenerate cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "TTestResult",
    "WelchResult",
    "amean",
    "betainc",
    "coeffvar",
    "confidence_interval",
    "describe",
    "gmean",
    "hmean",
    "maximum",
    "median",
    "minimum",
    "paired_ttest",
    "pct_improvement",
    "percentile",
    "stddev",
    "t_cdf",
    "t_critical",
    "t_sf2",
    "variance",
    "welch_ttest",
]


def _values(xs: Sequence[float]) -> list[float]:
    vals = [float(x) for x in xs]
    if not vals:
        raise ValueError("no values")
    return vals


def _constant(vals: list[float]) -> bool:
    return min(vals) == max(vals)


def amean(xs: Sequence[float]) -> float:
    """Arithmetic mean."""
    vals = _values(xs)
    if _constant(vals):  # exact result, no rounding noise for equal samples
        return vals[0]
    return math.fsum(vals) / len(vals)


def hmean(xs: Sequence[float]) -> float:
    """Harmonic mean; the right mean for rates.  Values must be > 0."""
    vals = _values(xs)
    if min(vals) <= 0:
        raise ValueError("harmonic mean needs values > 0")
    if _constant(vals):
        return vals[0]
    return len(vals) / math.fsum(1.0 / x for x in vals)


def gmean(xs: Sequence[float]) -> float:
    """Geometric mean.  Values must be > 0."""
    vals = _values(xs)
    if min(vals) <= 0:
        raise ValueError("geometric mean needs values > 0")
    if _constant(vals):
        return vals[0]
    return math.exp(math.fsum(math.log(x) for x in vals) / len(vals))


def median(xs: Sequence[float]) -> float:
    """Median (mean of the two middle values for an even count)."""
    vals = sorted(_values(xs))
    n = len(vals)
    mid = n // 2
    if n % 2:
        return vals[mid]
    return (vals[mid - 1] + vals[mid]) / 2.0


def percentile(xs: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), interpolating linearly between the
    closest ranks (numpy's default)."""
    vals = sorted(_values(xs))
    pos = (len(vals) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(vals) - 1)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def minimum(xs: Sequence[float]) -> float:
    return min(_values(xs))


def maximum(xs: Sequence[float]) -> float:
    return max(_values(xs))


def variance(xs: Sequence[float]) -> float:
    """Sample variance (n - 1 denominator); 0.0 for one value."""
    vals = _values(xs)
    if len(vals) < 2 or _constant(vals):
        return 0.0
    m = math.fsum(vals) / len(vals)
    return math.fsum((x - m) ** 2 for x in vals) / (len(vals) - 1)


def stddev(xs: Sequence[float]) -> float:
    """Sample standard deviation; 0.0 for one value."""
    return math.sqrt(variance(xs))


def coeffvar(xs: Sequence[float]) -> float:
    """Coefficient of variation in percent (stddev / |amean| * 100).

    0.0 for constant samples, NaN when the mean is 0 but the values vary.
    """
    sd = stddev(xs)
    if sd == 0.0:
        return 0.0
    m = amean(xs)
    if m == 0.0:
        return math.nan
    return sd / abs(m) * 100.0


# --- Student's t distribution -------------------------------------------

_EPS = 1e-15
_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """1 / (1 + d1/(1 + d2/(1 + ...))), the incomplete beta continued fraction.

    Evaluated with the modified Lentz method, with b_j = 1 and the usual
    coefficients d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)) and
    d_{2m} = m(b-m)x / ((a+2m-1)(a+2m)).
    """
    f = 1.0
    c = 1.0
    d = 0.0
    for j in range(1, 2001):
        m = j // 2
        if j % 2:
            coef = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        else:
            coef = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + coef * d
        if abs(d) < _TINY:
            d = _TINY
        c = 1.0 + coef / c
        if abs(c) < _TINY:
            c = _TINY
        d = 1.0 / d
        delta = c * d
        f *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return 1.0 / f


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0."""
    return _betainc(a, b, x, 1.0 - x)


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """I_x(a, b) with y == 1 - x passed in, computed without cancellation."""
    if a <= 0 or b <= 0:
        raise ValueError("betainc needs a > 0 and b > 0")
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log(y))
    front = math.exp(log_front)
    # The fraction converges fast for x < (a+1)/(a+b+2); use the symmetry
    # I_x(a, b) = 1 - I_{1-x}(b, a) on the other side.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, y) / b


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail probability P(|T| >= |t|) of Student's t with df > 0."""
    if df <= 0:
        raise ValueError("degrees of freedom must be > 0")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    t2 = t * t
    return _betainc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


def t_cdf(t: float, df: float) -> float:
    """Cumulative distribution function P(T <= t) of Student's t."""
    half_tail = t_sf2(t, df) / 2.0
    return 1.0 - half_tail if t > 0 else half_tail


def t_critical(df: float, confidence: float = 0.95) -> float:
    """Two-sided critical value: P(|T| <= value) == confidence."""
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    alpha = 1.0 - confidence
    lo, hi = 0.0, 1.0
    while t_sf2(hi, df) > alpha:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_sf2(mid, df) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def confidence_interval(xs: Sequence[float],
                        confidence: float = 0.95) -> tuple[float, float]:
    """(mean, half_width) of the t-based confidence interval of the mean.

    The interval is mean +- half_width.  half_width is NaN for one value.
    """
    vals = _values(xs)
    m = amean(vals)
    n = len(vals)
    if n < 2:
        return m, math.nan
    return m, t_critical(n - 1, confidence) * stddev(vals) / math.sqrt(n)


class TTestResult(NamedTuple):
    """A t-test result.  Fields are None when there are too few values."""

    t: float | None
    df: float | None
    p: float | None

    def significant(self, alpha: float = 0.05) -> bool:
        # A NaN p (overflowing input) compares False: never significant.
        return self.p is not None and self.p < alpha


WelchResult = TTestResult  # the older name


def _t_result(diff: float, se2: float, df) -> TTestResult:
    """t = diff / sqrt(se2) and its two-sided p; df is a callable, as it is
    undefined when se2 is 0.  With no spread at all the p-value is 1.0 for
    equal means and 0.0 otherwise."""
    if se2 == 0.0:
        if diff == 0.0:
            return TTestResult(0.0, math.inf, 1.0)
        return TTestResult(math.copysign(math.inf, diff), math.inf, 0.0)
    t = diff / math.sqrt(se2)
    dof = df()
    return TTestResult(t, dof, t_sf2(t, dof))


def welch_ttest(xs: Sequence[float], ys: Sequence[float]) -> TTestResult:
    """Welch's unequal-variance two-sample t-test, two-sided.  Never raises.

    t is positive when mean(xs) > mean(ys)."""
    a = [float(v) for v in xs]
    b = [float(v) for v in ys]
    if len(a) < 2 or len(b) < 2:
        return TTestResult(None, None, None)
    va, vb = variance(a) / len(a), variance(b) / len(b)
    se2 = va + vb
    return _t_result(amean(a) - amean(b), se2,
                     lambda: se2 * se2 / (va * va / (len(a) - 1)
                                          + vb * vb / (len(b) - 1)))


def paired_ttest(xs: Sequence[float], ys: Sequence[float]) -> TTestResult:
    """Paired t-test, two-sided: a one-sample t-test of the differences
    xs[i] - ys[i] against 0 (df = pairs - 1).  t has welch_ttest's sign.

    ValueError when the lengths differ; p=None with fewer than two pairs.
    """
    if len(xs) != len(ys):
        raise ValueError(f"paired t-test needs pairs: {len(xs)} vs {len(ys)} values")
    d = [float(x) - float(y) for x, y in zip(xs, ys)]
    if len(d) < 2:
        return TTestResult(None, None, None)
    return _t_result(amean(d), variance(d) / len(d), lambda: len(d) - 1)


def pct_improvement(base: float, new: float, higher_is_better: bool) -> float | None:
    """Signed % change of new vs base, positive meaning better.

    Lower is better (times):  (base - new) / base * 100.
    Higher is better (rates): (new - base) / base * 100.
    0.0 when both are equal; None when base is 0 and new is not.
    """
    if base == new:
        return 0.0
    if base == 0:
        return None
    diff = new - base if higher_is_better else base - new
    return diff / abs(base) * 100.0


def describe(xs: Sequence[float], higher_is_better: bool = False) -> dict:
    """Summary dict: n, mean (Hmean if higher_is_better else Amean), amean,
    stddev, coeffvar, min, max, median, ci95 (half width)."""
    vals = _values(xs)
    use_hmean = higher_is_better and min(vals) > 0
    return {
        "n": len(vals),
        "mean": hmean(vals) if use_hmean else amean(vals),
        "mean_kind": "Hmean" if use_hmean else "Amean",
        "amean": amean(vals),
        "stddev": stddev(vals),
        "coeffvar": coeffvar(vals),
        "min": min(vals),
        "max": max(vals),
        "median": median(vals),
        "ci95": confidence_interval(vals)[1],
    }
