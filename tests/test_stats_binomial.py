"""The exact binomial test and Clopper–Pearson interval against scipy.stats.binomtest, and their duality."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from jaxassoc.errors import ConfigError
from jaxassoc.stats.binomial import binomial_test

CASES = [(60, 100), (3, 10), (0, 5), (5, 5), (843, 1508), (1, 1), (31, 63)]


@pytest.mark.parametrize("k,n", CASES)
@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_p_and_interval_equal_scipy(k, n, alternative):
    got = binomial_test(k, n, alternative=alternative, confidence=0.9)
    one = {a: sps.binomtest(k, n, alternative=a) for a in ("greater", "less", "two-sided")}
    want_p = (
        one[alternative].pvalue
        if alternative != "two-sided"
        else min(1, 2 * min(one["greater"].pvalue, one["less"].pvalue))
    )
    # float64 on both sides (binomial sums and beta quantiles: ~1e-15 relative per term); rtol=1e-10 leaves
    # room for the different summation and root-finding of the two implementations
    np.testing.assert_allclose(got.p_value, want_p, rtol=1e-10, atol=1e-300)
    ci = one[alternative].proportion_ci(0.9, method="exact")
    np.testing.assert_allclose([got.low, got.high], [ci.low, ci.high], rtol=1e-9, atol=1e-12)
    assert got.share == k / n and (got.k, got.n) == (k, n)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_interval_excludes_one_half_exactly_when_p_is_below_alpha(alternative):
    for n in (7, 40, 101):
        for k in range(n + 1):
            r = binomial_test(k, n, alternative=alternative, confidence=0.95)
            assert (r.p_value < 0.05) == (not r.low <= 0.5 <= r.high), (k, n, r)


def test_bad_arguments_are_named():
    with pytest.raises(ConfigError, match="alternative='bigger'"):
        binomial_test(1, 2, alternative="bigger")
    with pytest.raises(ConfigError, match="k=3, n=2"):
        binomial_test(3, 2)
