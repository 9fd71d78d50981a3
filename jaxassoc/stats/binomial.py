"""A share of n trials against a hypothesised rate: exact binomial test and Clopper–Pearson interval
(docs/methods.md §6.4).

The two are inversions of each other: the two-sided p is twice the smaller tail (the "central" test,
capped at 1), so ``p < 1 - confidence`` exactly when the Clopper–Pearson interval excludes ``p0``; a
one-sided test (``alternative="greater"`` / ``"less"``) goes with a one-sided interval ``[lo, 1]`` /
``[0, hi]``. Counts are exact integers: the p-value has no resampling resolution.
"""

from __future__ import annotations

from typing import NamedTuple

from jaxassoc.errors import ConfigError
from jaxassoc.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE, StatsOptions


class BinomialResult(NamedTuple):
    """``k`` successes of ``n``: their share, its interval and the test of ``share == p0``."""

    share: float
    low: float
    high: float
    p_value: float
    k: int
    n: int


def binomial_test(
    k: int,
    n: int,
    *,
    p0: float = 0.5,
    alternative: str = DEFAULT_ALTERNATIVE,
    confidence: float = StatsOptions.confidence,
) -> BinomialResult:
    """Exact test of ``k`` successes in ``n`` trials against rate ``p0`` with its Clopper–Pearson interval
    (Clopper & Pearson 1934), sided as ``alternative``."""
    from scipy.special import betainc  # the binomial tails as regularised incomplete beta functions

    if alternative not in ALTERNATIVES:
        raise ConfigError(f"binomial_test: alternative={alternative!r} is not one of {ALTERNATIVES}")
    if not (0 <= k <= n and n >= 1):
        raise ConfigError(f"binomial_test: need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    if not 0 < confidence < 1:
        raise ConfigError(f"binomial_test: confidence={confidence} must lie strictly between 0 and 1")
    upper_tail = 1.0 if k == 0 else float(betainc(k, n - k + 1, p0))  # P(K >= k)
    lower_tail = 1.0 if k == n else float(betainc(n - k, k + 1, 1 - p0))  # P(K <= k)
    alpha = 1 - confidence
    if alternative == "two-sided":
        p, low, high = min(1.0, 2 * min(upper_tail, lower_tail)), _lower(k, n, alpha / 2), _upper(k, n, alpha / 2)
    elif alternative == "greater":
        p, low, high = upper_tail, _lower(k, n, alpha), 1.0
    else:
        p, low, high = lower_tail, 0.0, _upper(k, n, alpha)
    return BinomialResult(k / n, low, high, p, int(k), int(n))


def _lower(k: int, n: int, tail: float) -> float:
    from scipy.special import betaincinv

    return 0.0 if k == 0 else float(betaincinv(k, n - k + 1, tail))


def _upper(k: int, n: int, tail: float) -> float:
    from scipy.special import betaincinv

    return 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - tail))
