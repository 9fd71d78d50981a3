"""Percentile bootstrap against scipy.stats.bootstrap (same method, other RNG: loose bounds) and invariants."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from tolerances import f32_cos, f32_sum

import jaxassoc.stats.bootstrap as bootstrap_module
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.stats import bootstrap_ci, bootstrap_ci_groups, paired_bootstrap, spearman
from jaxassoc.stats.bootstrap import _row_indices

KEY = jax.random.key(0)


def mean(x):
    return jnp.mean(x)


def mean_difference(x, y):
    return jnp.mean(x) - jnp.mean(y)


def spearman_along(a, b, axis=-1):
    """Vectorised Spearman reference for scipy.stats.bootstrap: Pearson r of scipy's average ranks."""
    ra, rb = st.rankdata(a, axis=axis), st.rankdata(b, axis=axis)
    ra = ra - ra.mean(axis=axis, keepdims=True)
    rb = rb - rb.mean(axis=axis, keepdims=True)
    return (ra * rb).sum(axis=axis) / np.sqrt((ra * ra).sum(axis=axis) * (rb * rb).sum(axis=axis))


def assert_ci_close(ours, ref, share=0.1):
    """Bounds within `share` of the reference interval's width (Monte Carlo error of both)."""
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert abs(float(ours.low) - ref.confidence_interval.low) < share * width
    assert abs(float(ours.high) - ref.confidence_interval.high) < share * width


def test_mean_ci_matches_scipy_percentile():
    x = np.random.default_rng(0).gamma(2.0, size=60).astype(np.float32)
    ours = bootstrap_ci(KEY, mean, (x,), n_resamples=4000)
    ref = st.bootstrap((x,), np.mean, method="percentile", n_resamples=4000, rng=np.random.default_rng(1))
    # a float32 mean of 60 positive values: f32_sum(60, mean) / mean relative, 1.8e-6 (rel=1e-6 had been below)
    assert float(ours.estimate) == pytest.approx(x.mean(), rel=f32_sum(len(x), 1.0) / len(x))
    assert ours.samples.shape == (4000,)
    assert_ci_close(ours, ref)
    # percentile definition: linear-interpolated quantiles of the returned samples (float32 interpolation
    # between two neighbours: a few u relative)
    np.testing.assert_allclose(
        [float(ours.low), float(ours.high)], np.percentile(np.asarray(ours.samples), [2.5, 97.5]), rtol=1e-6
    )


def test_paired_rows_spearman_ci_matches_scipy():
    rng = np.random.default_rng(2)
    x = rng.normal(size=40).astype(np.float32)
    y = (x + rng.normal(size=40)).astype(np.float32)
    ours = bootstrap_ci(KEY, spearman, (x, y), n_resamples=3000, confidence=0.9)
    ref = st.bootstrap(
        (x, y),
        spearman_along,
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=3000,
        confidence_level=0.9,
        rng=np.random.default_rng(3),
    )
    # Spearman's ρ in float32: Pearson's r of exact ranks, f32_cos(n) (abs=1e-6 had been below it)
    assert float(ours.estimate) == pytest.approx(st.spearmanr(x, y).statistic, abs=f32_cos(len(x)))
    assert spearman_along(x, y) == pytest.approx(st.spearmanr(x, y).statistic, abs=1e-12)
    assert_ci_close(ours, ref)


def test_rows_are_resampled_jointly():
    x = np.arange(30.0)
    res = bootstrap_ci(KEY, lambda a, b: jnp.max(jnp.abs(a - b)) + jnp.mean(a), (x, x.copy()), n_resamples=500)
    # row i of a always comes with row i of b (else max|a - b| >= 1 and samples exceed the range of means)
    assert float(jnp.max(res.samples)) < 29.0
    assert float(jnp.std(res.samples)) > 0.5  # and rows are really redrawn


def test_stratified_groups_match_scipy_independent_samples():
    rng = np.random.default_rng(4)
    s_x = rng.normal(0.4, 1.0, 8).astype(np.float32)
    s_y = rng.normal(0.0, 1.0, 12).astype(np.float32)
    ours = bootstrap_ci_groups(KEY, mean_difference, (s_x, s_y), n_resamples=4000)
    # scipy resamples each of several unpaired samples within itself: the same stratified scheme
    ref = st.bootstrap(
        (s_x, s_y),
        lambda a, b, axis: np.mean(a, axis=axis) - np.mean(b, axis=axis),
        paired=False,
        method="percentile",
        n_resamples=4000,
        rng=np.random.default_rng(5),
    )
    # two float32 means (f32_sum(n, max|s|) / n each) and a difference
    tol = sum(f32_sum(len(s), float(np.abs(s).max())) / len(s) for s in (s_x, s_y)) + f32_sum(1, 2.0)
    assert float(ours.estimate) == pytest.approx(s_x.mean() - s_y.mean(), abs=tol)
    assert_ci_close(ours, ref)
    # analytic spread of the stratified bootstrap distribution: var = popvar(X)/|X| + popvar(Y)/|Y|; sampling:
    # an SD estimated from 4000 resamples has relative SE ~1 / √(2·4000) = 1.1%, rel=0.05 is ~4.5 SEs
    sd = np.sqrt(s_x.var() / 8 + s_y.var() / 12)
    assert float(jnp.std(ours.samples)) == pytest.approx(sd, rel=0.05)


def test_groups_never_mix_and_keep_their_structure():
    x = np.array([1.0, 2.0, 3.0])
    y_pairs = (np.array([10.0, 20.0, 30.0, 40.0]), np.array([10.0, 20.0, 30.0, 40.0]))

    def check(a, pair):
        in_x = jnp.all((a >= 1) & (a <= 3))
        paired = jnp.all(pair[0] == pair[1]) & jnp.all(pair[0] >= 10)
        return (in_x & paired).astype(jnp.float32)

    res = bootstrap_ci_groups(KEY, check, (x, y_pairs), n_resamples=300)
    assert float(jnp.min(res.samples)) == 1.0


def test_deterministic_and_independent_of_batching(monkeypatch):
    x = np.random.default_rng(6).normal(size=25).astype(np.float32)
    a = bootstrap_ci(KEY, mean, (x,), n_resamples=1000)
    b = bootstrap_ci(KEY, mean, (x,), n_resamples=1000)
    np.testing.assert_array_equal(np.asarray(a.samples), np.asarray(b.samples))
    monkeypatch.setattr(bootstrap_module, "_BATCH_BYTES", 25 * 4 * 7)  # 7 resamples at a time
    c = bootstrap_ci(KEY, mean, (x,), n_resamples=1000)
    # the same rows are drawn; only the vectorised reduction may round differently: means of 25 values,
    # f32_sum(25, max|x|) / 25
    tol = f32_sum(len(x), float(np.abs(x).max())) / len(x)
    np.testing.assert_allclose(np.asarray(a.samples), np.asarray(c.samples), rtol=0, atol=tol)
    d = bootstrap_ci(jax.random.key(1), mean, (x,), n_resamples=1000)
    assert not np.array_equal(np.asarray(a.samples), np.asarray(d.samples))


def _spearman_first(x1, x2, y):
    return spearman(x1, y)


def _spearman_second(x1, x2, y):
    return spearman(x2, y)


def test_paired_bootstrap_difference_ci_and_p_against_scipy_distribution():
    rng = np.random.default_rng(7)
    y = rng.normal(size=50)
    x1 = (y + rng.normal(size=50) * 0.9).astype(np.float32)
    x2 = (y + rng.normal(size=50) * 1.2).astype(np.float32)
    data = (x1, x2, y.astype(np.float32))
    n = 4000
    ours = paired_bootstrap(KEY, _spearman_first, _spearman_second, data, n_resamples=n)
    ref = st.bootstrap(
        data,
        lambda a, b, c, axis: spearman_along(a, c, axis) - spearman_along(b, c, axis),
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=n,
        rng=np.random.default_rng(8),
    )
    d = st.spearmanr(x1, y).statistic - st.spearmanr(x2, y).statistic
    assert float(ours.difference) == pytest.approx(d, abs=2 * f32_cos(50))  # two float32 ρ's (f32_cos(n) each)
    assert_ci_close(ours, ref)
    dist = ref.bootstrap_distribution
    other = np.sum(dist <= 0) if d >= 0 else np.sum(dist >= 0)
    p_ref = min(1.0, 2 * (other + 1) / (n + 1))
    assert 0.01 < p_ref < 0.9  # a p-value that the comparison can resolve
    assert abs(float(ours.p_value) - p_ref) < 4 * 2 * np.sqrt(p_ref * (1 - p_ref) / n) + 2 / n


def test_paired_bootstrap_of_identical_statistics():
    x = np.random.default_rng(9).normal(size=(20,)).astype(np.float32)
    res = paired_bootstrap(KEY, mean, mean, (x,), n_resamples=200)
    assert float(res.difference) == 0.0 and float(res.low) == 0.0 and float(res.high) == 0.0
    assert float(res.p_value) == 1.0


def test_nan_resample_statistic_gives_nan_interval():
    x = np.array([1.0, 1.0, 1.0, 2.0], np.float32)  # some resamples are constant: Spearman is NaN
    res = bootstrap_ci(KEY, spearman, (x, x), n_resamples=200)
    assert np.isnan(np.asarray(res.samples)).any()
    assert np.isnan(float(res.low)) and np.isnan(float(res.high))
    assert np.isnan(float(paired_bootstrap(KEY, spearman, pearson_of, (x, x), n_resamples=200).p_value))


def pearson_of(a, b):
    return jnp.corrcoef(a, b)[0, 1]


def test_row_indices_are_the_high_word_of_bits_times_n():
    bits = np.random.default_rng(10).integers(0, 2**32, 50_000, dtype=np.uint64)
    bits[:2] = [0, 2**32 - 1]
    for n in (1, 2, 7, 1000, 2**16 - 1):
        expected = (bits * np.uint64(n)) >> np.uint64(32)  # exact in uint64
        np.testing.assert_array_equal(np.asarray(_row_indices(jnp.asarray(bits.astype(np.uint32)), n)), expected)


def test_many_rows_use_randint_and_stay_in_range():
    x = np.arange(70_000, dtype=np.float32)  # >= 2^16 rows
    res = bootstrap_ci(KEY, mean, (x,), n_resamples=40)
    assert abs(float(jnp.mean(res.samples)) - x.mean()) < 4 * x.std() / np.sqrt(70_000 * 20)
    assert float(jnp.std(res.samples)) > 0


def test_bad_inputs_raise_clear_errors():
    x = np.arange(5.0)
    with pytest.raises(InputError, match="same number of rows"):
        bootstrap_ci(KEY, mean_difference, (x, x[:4]))
    with pytest.raises(InputError, match="no rows"):
        bootstrap_ci(KEY, mean, (x[:0],))
    with pytest.raises(InputError, match="non-empty tuple"):
        bootstrap_ci_groups(KEY, mean, ())
    with pytest.raises(ConfigError, match="confidence"):
        bootstrap_ci(KEY, mean, (x,), confidence=95)
    with pytest.raises(ConfigError, match="n_resamples"):
        paired_bootstrap(KEY, mean, mean, (x,), n_resamples=0)
    with pytest.raises(ConfigError, match=r"n_resamples=39 is too few for a 95% CI.*at least 40"):
        bootstrap_ci(KEY, mean, (x,), n_resamples=39)  # its 2.5 % and 97.5 % percentiles: the extremes
    with pytest.raises(ConfigError, match=r"at least 200"):
        bootstrap_ci(KEY, mean, (x,), n_resamples=100, confidence=0.99)
    with pytest.raises(InputError, match="scalar"):
        bootstrap_ci(KEY, jnp.cumsum, (x,), n_resamples=40)


def test_the_older_prng_key_gives_the_same_resamples():
    """jax.random.PRNGKey (raw uint32[2]) crashed the batching reshape; it must draw as jax.random.key."""
    x = np.random.default_rng(0).normal(size=40).astype(np.float32)
    typed = bootstrap_ci(jax.random.key(5), jnp.mean, (x,), n_resamples=300)
    raw = bootstrap_ci(jax.random.PRNGKey(5), jnp.mean, (x,), n_resamples=300)
    np.testing.assert_array_equal(raw.samples, typed.samples)
    groups = bootstrap_ci_groups(jax.random.PRNGKey(5), _mean_difference, (x[:20], x[20:]), n_resamples=300)
    np.testing.assert_array_equal(
        groups.samples,
        bootstrap_ci_groups(jax.random.key(5), _mean_difference, (x[:20], x[20:]), n_resamples=300).samples,
    )
    paired = paired_bootstrap(jax.random.PRNGKey(5), jnp.mean, jnp.median, (x,), n_resamples=300)
    assert paired == paired_bootstrap(jax.random.key(5), jnp.mean, jnp.median, (x,), n_resamples=300)
    with pytest.raises(InputError, match=r"bootstrap_ci: key must be one PRNG key.*dtype float32"):
        bootstrap_ci(jnp.zeros(2), jnp.mean, (x,), n_resamples=300)


def _mean_difference(a, b):
    return a.mean() - b.mean()


def test_one_sided_ci_is_the_one_sided_percentile_bound():
    """Beside a one-sided test the CI is one-sided: [the 5 % quantile, inf) for "greater" at 95 %
    (scipy's ``alternative="greater"`` percentile interval), (-inf, the 95 % quantile] for "less"."""
    x = np.random.default_rng(3).normal(0.2, 1.0, size=40).astype(np.float32)
    two = bootstrap_ci(KEY, mean, (x,), n_resamples=2000)
    greater = bootstrap_ci(KEY, mean, (x,), n_resamples=2000, alternative="greater")
    less = bootstrap_ci_groups(KEY, mean, (x,), n_resamples=2000, alternative="less")
    samples = np.asarray(two.samples)
    # float32 interpolation between neighbouring samples: a few u relative
    np.testing.assert_allclose(float(greater.low), np.percentile(samples, 5), rtol=1e-6)
    assert float(greater.high) == np.inf and float(less.low) == -np.inf
    np.testing.assert_allclose(float(less.high), np.percentile(np.asarray(less.samples), 95), rtol=1e-6)
    assert float(two.low) < float(greater.low)  # the one-sided bound is the tighter one on its side
    ref = st.bootstrap(
        (x,), np.mean, method="percentile", n_resamples=4000, alternative="greater", rng=np.random.default_rng(1)
    )
    assert ref.confidence_interval.high == np.inf
    assert abs(float(greater.low) - ref.confidence_interval.low) < 0.1 * (float(two.high) - float(two.low))
    with pytest.raises(ConfigError, match="'sideways'"):
        bootstrap_ci(KEY, mean, (x,), n_resamples=2000, alternative="sideways")
