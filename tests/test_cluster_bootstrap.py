"""``stats.cluster_bootstrap_means`` beside a NumPy cluster bootstrap: the estimates are the column means,
the CIs agree with NumPy's (own draws, many resamples) within a few percent of their width, a resample never
leaves the clusters' range, clusters with one value each give a zero-width CI, and bad inputs are refused."""

import jax
import numpy as np
import pytest
from tolerances import f32_sum

from jaxassoc.errors import InputError
from jaxassoc.stats.cluster_bootstrap import cluster_bootstrap_means, cluster_codes


def numpy_cluster_ci(values, clusters, n_resamples, confidence, seed=0):
    rng = np.random.default_rng(seed)
    C = clusters.max() + 1
    sums = np.stack([values[clusters == c].sum(axis=0) for c in range(C)])
    counts = np.bincount(clusters, minlength=C).astype(float)
    means = []
    for _ in range(n_resamples):
        drawn = rng.integers(0, C, C)
        means.append(sums[drawn].sum(axis=0) / counts[drawn].sum())
    alpha = 1 - confidence
    return np.quantile(np.array(means), [alpha / 2, 1 - alpha / 2], axis=0)


def test_means_and_cis_match_a_numpy_cluster_bootstrap():
    rng = np.random.default_rng(1)
    C = 40
    sizes = rng.integers(1, 6, C)  # unequal clusters
    clusters = np.repeat(np.arange(C), sizes)
    shift = rng.normal(size=(C, 3))[clusters]  # a cluster effect: rows within a cluster are alike
    values = (shift + 0.3 * rng.normal(size=(len(clusters), 3))).astype(np.float32)
    ours = cluster_bootstrap_means(jax.random.key(0), values, clusters, n_resamples=20_000, confidence=0.9)
    # a float32 mean of n rows against NumPy's: f32_sum(n, max|v| / n) absolute (a column mean can be near 0,
    # so no relative bound: rtol=1e-5 had assumed no cancellation)
    bound = f32_sum(len(values), float(np.abs(values).max()) / len(values))
    np.testing.assert_allclose(ours.estimate, values.mean(axis=0), rtol=0, atol=bound)
    low, high = numpy_cluster_ci(values, clusters, 20_000, 0.9)
    width = high - low
    # two Monte Carlo percentiles from 20,000 resamples each: their SDs are ~1 % of the width; 5 % is > 3 SD
    np.testing.assert_allclose(ours.low, low, atol=0.05 * width.max())
    np.testing.assert_allclose(ours.high, high, atol=0.05 * width.max())
    assert ours.n_clusters == C
    # resampling rows instead of clusters would be narrower: the clusters matter here
    row_low, row_high = numpy_cluster_ci(values, np.arange(len(clusters)), 4000, 0.9)
    assert (np.asarray(ours.high - ours.low) > 1.3 * (row_high - row_low)).all()


def test_resampled_means_stay_within_the_clusters_means_and_constant_clusters_give_a_point():
    values = np.array([[1.0], [3.0], [3.0], [10.0]], np.float32)
    clusters = cluster_codes(["a", "b", "b", "c"])
    assert clusters.tolist() == [0, 1, 1, 2]
    result = cluster_bootstrap_means(jax.random.key(3), values, clusters, n_resamples=999)
    assert 1.0 <= float(result.low[0]) < float(result.high[0]) <= 10.0
    same = cluster_bootstrap_means(
        jax.random.key(3), np.full((6, 2), 0.25, np.float32), np.arange(6) % 3, n_resamples=99
    )
    np.testing.assert_array_equal(np.asarray(same.low), np.asarray(same.high))


def test_bad_inputs_are_refused():
    key = jax.random.key(0)
    with pytest.raises(InputError, match=r"values must be \(rows, columns\) and clusters one label per row"):
        cluster_bootstrap_means(key, np.zeros((3, 2)), np.zeros(4, int))
    with pytest.raises(InputError, match=r"values must be finite"):
        cluster_bootstrap_means(key, np.array([[np.nan]]), np.zeros(1, int))
    with pytest.raises(InputError, match=r"clusters must number the clusters 0..C-1"):
        cluster_bootstrap_means(key, np.zeros((2, 1)), np.array([0, 2]))
