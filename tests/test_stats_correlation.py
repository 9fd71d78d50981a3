"""Correlations against scipy.stats: coefficients, p-values, ties, NaN policies, degenerate inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st

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
        np.testing.assert_allclose(float(ours[name].statistic), ref[name].statistic, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(float(ours[name].p_value), ref[name].pvalue, rtol=2e-4, atol=1e-30, err_msg=name)
    np.testing.assert_allclose(float(pearson(x, y)), ref["pearson"].statistic, atol=2e-6)
    np.testing.assert_allclose(float(spearman(x, y)), ref["spearman"].statistic, atol=2e-6)
    np.testing.assert_allclose(float(kendall_tau_b(x, y)), ref["kendall"].statistic, atol=2e-6)


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
    r = pearson_test(x, y, nan_policy="omit")
    ref = st.pearsonr(x[keep], y[keep])
    np.testing.assert_allclose(float(r.statistic), ref.statistic, atol=2e-6)
    np.testing.assert_allclose(float(r.p_value), ref.pvalue, rtol=2e-4)
    rho = spearman_test(x, y, nan_policy="omit")
    ref = st.spearmanr(x, y, nan_policy="omit")
    np.testing.assert_allclose(float(rho.statistic), ref.statistic, atol=2e-6)
    np.testing.assert_allclose(float(rho.p_value), ref.pvalue, rtol=2e-4)
    tau = kendall_test(x, y, nan_policy="omit")
    ref = st.kendalltau(x, y, nan_policy="omit", method="asymptotic")
    np.testing.assert_allclose(float(tau.statistic), ref.statistic, atol=2e-6)
    np.testing.assert_allclose(float(tau.p_value), ref.pvalue, rtol=2e-4)
    np.testing.assert_allclose(float(kendall_tau_b(x, y, nan_policy="omit")), ref.statistic, atol=2e-6)


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
    np.testing.assert_allclose(np.asarray(batched), ref, atol=2e-6)
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
