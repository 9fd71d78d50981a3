"""Correlations against scipy.stats: coefficients, p-values, ties, NaN policies, degenerate inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from tolerances import EPS32, f32_cos

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.stats import (
    kendall_tau_b,
    kendall_test,
    pearson,
    pearson_test,
    rankdata,
    spearman,
    spearman_test,
)

# Float32 statistics against float64 scipy. Pearson's r is a cosine of the centred vectors: f32_cos(n) (the
# means' rounding cancels to first order: Σ(y - ȳ) = 0); Spearman's ρ is Pearson's r of exact ranks: the
# same. Kendall's τ-b: the pair counts are exact integers (< 2^24), four roundings (products, square root,
# division) remain: 4·f32_sum(1, 1) ≤ 2e-6 (atol=2e-6 had been below f32_cos(n) for Pearson and Spearman
# from n ~ 60: 7e-6 at 60, 1.8e-5 at 600).
KENDALL_TOL = 2e-6


def _stat_tol(name: str, n: int) -> float:
    return KENDALL_TOL if name == "kendall" else f32_cos(n)


def _p_tol(name: str, n: int, stat: float, p: float) -> float:
    """The p-value's band for a statistic within _stat_tol: p re-evaluated in float64 at stat ± tol (a t test
    with n - 2 degrees of freedom for r and ρ, as scipy's; for τ the normal z scales with τ), plus a few ulps
    of the float32 special function (8·EPS32 relative). rtol=2e-4 had been below it where p is small: a
    statistic's error moves log p by d log p / d stat (~500 at n = 600, r = 0.5)."""
    tol = _stat_tol(name, n)
    if name == "kendall":
        z = st.norm.isf(p / 2)
        band = [2 * st.norm.sf(z * abs(t) / abs(stat)) for t in (stat - tol, stat + tol)]
    else:
        band = [
            2 * st.t.sf(abs(r) * np.sqrt((n - 2) / (1 - r * r)), n - 2)
            for r in np.clip([stat - tol, stat + tol], -1, 1)
        ]
    return max(abs(b - p) for b in band) + 8 * EPS32 * p


def _tied_pair(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Correlated data with many ties in x (7 levels) and some in y (rounded third)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 7, n).astype(np.float64)
    y = x + rng.normal(size=n) * 3.0
    y[: n // 3] = np.round(y[: n // 3])
    return x.astype(np.float32), y.astype(np.float32)


@pytest.mark.parametrize("seed,n", [(0, 9), (1, 60), (2, 600)])
def test_coefficients_and_p_values_match_scipy_with_ties(seed, n):
    x, y = _tied_pair(seed, n)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = {
        "pearson": st.pearsonr(x64, y64),
        "spearman": st.spearmanr(x64, y64),
        "kendall": st.kendalltau(x64, y64, method="asymptotic"),
    }
    ours = {"pearson": pearson_test(x, y), "spearman": spearman_test(x, y), "kendall": kendall_test(x, y)}
    for name in ours:
        stat, p = ref[name].statistic, ref[name].pvalue
        np.testing.assert_allclose(float(ours[name].statistic), stat, rtol=0, atol=_stat_tol(name, n), err_msg=name)
        # atol=1e-30: below it float32 p underflows
        tol = _p_tol(name, n, stat, p) + 1e-30
        np.testing.assert_allclose(float(ours[name].p_value), p, rtol=0, atol=tol, err_msg=name)
    np.testing.assert_allclose(float(pearson(x, y)), ref["pearson"].statistic, atol=f32_cos(n))
    np.testing.assert_allclose(float(spearman(x, y)), ref["spearman"].statistic, atol=f32_cos(n))
    np.testing.assert_allclose(float(kendall_tau_b(x, y)), ref["kendall"].statistic, atol=KENDALL_TOL)


def test_rankdata_averages_ties_like_scipy():
    x = np.array([3.0, 1.0, 3.0, 2.0, 3.0, -np.inf, np.inf, 2.0], np.float32)
    np.testing.assert_array_equal(np.asarray(rankdata(x)), st.rankdata(x))
    assert np.isnan(np.asarray(rankdata(np.array([1.0, np.nan, 2.0])))).all()


def test_nan_propagates_by_default():
    x = np.array([1.0, np.nan, 3.0, 4.0, 2.0, 7.0])
    y = np.array([2.0, 1.0, 5.0, 5.0, 3.0, 1.0])
    for f in (pearson, spearman, kendall_tau_b):
        assert np.isnan(float(f(x, y)))
    for f in (pearson_test, spearman_test, kendall_test):
        assert np.isnan(np.asarray(f(x, y))).all()


def test_nan_omit_matches_scipy_pairwise_complete():
    rng = np.random.default_rng(3)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    x[[3, 17]] = np.nan
    y[[5, 17, 30]] = np.nan
    y[:8] = np.round(y[:8])  # ties among the kept pairs
    keep = ~(np.isnan(x) | np.isnan(y))
    # scipy's pearsonr has no nan_policy: the reference drops the pairs by hand.
    n = int(keep.sum())
    r = pearson_test(x, y, nan_policy="omit")
    ref = st.pearsonr(x[keep], y[keep])
    np.testing.assert_allclose(float(r.statistic), ref.statistic, rtol=0, atol=f32_cos(n))
    np.testing.assert_allclose(
        float(r.p_value), ref.pvalue, rtol=0, atol=_p_tol("pearson", n, ref.statistic, ref.pvalue)
    )
    rho = spearman_test(x, y, nan_policy="omit")
    ref = st.spearmanr(x, y, nan_policy="omit")
    np.testing.assert_allclose(float(rho.statistic), ref.statistic, rtol=0, atol=f32_cos(n))
    tol = _p_tol("spearman", n, ref.statistic, ref.pvalue)
    np.testing.assert_allclose(float(rho.p_value), ref.pvalue, rtol=0, atol=tol)
    tau = kendall_test(x, y, nan_policy="omit")
    ref = st.kendalltau(x, y, nan_policy="omit", method="asymptotic")
    np.testing.assert_allclose(float(tau.statistic), ref.statistic, rtol=0, atol=KENDALL_TOL)
    tol = _p_tol("kendall", n, ref.statistic, ref.pvalue)
    np.testing.assert_allclose(float(tau.p_value), ref.pvalue, rtol=0, atol=tol)
    np.testing.assert_allclose(float(kendall_tau_b(x, y, nan_policy="omit")), ref.statistic, atol=KENDALL_TOL)


def test_constant_input_gives_nan_like_scipy():
    x = np.full(6, 0.1, np.float32)  # 0.1 is not exact in binary: centring alone would leave residue
    y = np.arange(6.0)
    with pytest.warns(st.ConstantInputWarning):
        assert np.isnan(st.pearsonr(x, y).statistic)
    for f in (pearson, spearman, kendall_tau_b):
        assert np.isnan(float(f(x, y)))
        assert np.isnan(float(f(y, x)))
    # constant once the NaN pair is omitted
    assert np.isnan(float(spearman(np.array([1.0, 1.0, np.nan]), np.array([1.0, 2.0, 3.0]), nan_policy="omit")))


def test_two_pairs_and_perfect_correlation():
    res = pearson_test(np.array([1.0, 2.0]), np.array([3.0, 1.0]))
    ref = st.pearsonr([1.0, 2.0], [3.0, 1.0])
    assert float(res.statistic) == ref.statistic == -1.0
    assert float(res.p_value) == ref.pvalue == 1.0
    x = np.arange(10.0)
    assert float(spearman_test(x, x**3).statistic) == 1.0
    assert float(spearman_test(x, x**3).p_value) == 0.0
    assert float(kendall_tau_b(x, -x)) == -1.0


def test_composes_with_jit_and_vmap():
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(5, 30)).astype(np.float32)
    ys = (xs + rng.normal(size=(5, 30))).astype(np.float32)
    batched = jax.jit(jax.vmap(lambda a, b: spearman(a, b, nan_policy="omit")))(xs, ys)
    ref = [st.spearmanr(a, b).statistic for a, b in zip(xs, ys)]
    np.testing.assert_allclose(np.asarray(batched), ref, rtol=0, atol=f32_cos(xs.shape[1]))  # Spearman: f32_cos(n)
    grad = jax.grad(lambda a: pearson(a, ys[0]))(jnp.asarray(xs[0]))
    assert np.isfinite(np.asarray(grad)).all()


def test_bad_inputs_raise_clear_errors():
    x = np.arange(5.0)
    with pytest.raises(ConfigError, match="nan_policy='raise'"):
        spearman(x, x, nan_policy="raise")
    with pytest.raises(InputError, match="same length"):
        pearson(x, x[:4])
    with pytest.raises(InputError, match="1-D"):
        kendall_tau_b(x.reshape(5, 1), x.reshape(5, 1))
    with pytest.raises(InputError, match="at least 2 pairs"):
        spearman_test(x[:1], x[:1])
