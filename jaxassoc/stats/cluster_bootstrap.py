"""Cluster bootstrap of many means at once (Davison & Hinkley 1997, §3.8; docs/methods.md §10.8).

Rows that share a cluster (the examples of one profession in Vig et al.'s mediation analysis: one per
template) are not independent; resampling rows would understate the spread. Each resample draws the
clusters with replacement (``jax.random.split(key, n_resamples)[r]``) and takes every column's mean over
the drawn clusters' rows (a cluster drawn twice counts twice); the CI is the percentile interval of those
means, as :mod:`jaxassoc.stats.bootstrap` (the quantiles linearly interpolated, numpy's default). One set
of resamples serves every column, so their CIs are computed on the same draws.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxassoc.errors import InputError
from jaxassoc.stats.bootstrap import _check_settings
from jaxassoc.stats.keys import check_key
from jaxassoc.stats.options import StatsOptions

_CHUNK = 256  # resamples per step: their (chunk, clusters) counts and (chunk, columns) means


class ClusterBootstrapResult(NamedTuple):
    """Each column's mean over all rows, its percentile CI bounds, and the number of clusters."""

    estimate: Float[Array, " K"]
    low: Float[Array, " K"]
    high: Float[Array, " K"]
    n_clusters: int


def cluster_codes(labels) -> np.ndarray:
    """Each row's cluster as 0..C-1 (in order of first appearance) from any hashable labels."""
    codes: dict = {}
    return np.array([codes.setdefault(label, len(codes)) for label in labels], np.int32)


def cluster_bootstrap_means(
    key: PRNGKeyArray,
    values: Float[Array, "n K"],
    clusters: Int[Array, " n"],
    *,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
) -> ClusterBootstrapResult:
    """The mean of each column of ``values`` over its rows with a percentile CI from resampling the
    clusters (``clusters``: each row's cluster, 0..C-1, e.g. from :func:`cluster_codes`). InputError for
    mismatched shapes or non-finite values."""
    _check_settings("cluster_bootstrap_means", n_resamples, confidence)
    key = check_key("cluster_bootstrap_means", key)
    values, clusters = np.asarray(values, np.float32), np.asarray(clusters)
    if values.ndim != 2 or clusters.shape != (values.shape[0],) or values.shape[0] == 0:
        raise InputError(
            f"cluster_bootstrap_means: values must be (rows, columns) and clusters one label per row; got "
            f"{values.shape} and {clusters.shape}"
        )
    if not np.isfinite(values).all():
        raise InputError("cluster_bootstrap_means: values must be finite")
    n_clusters = int(clusters.max()) + 1
    if clusters.min() < 0 or len(np.unique(clusters)) != n_clusters:
        raise InputError("cluster_bootstrap_means: clusters must number the clusters 0..C-1 (see cluster_codes)")
    sums = jax.ops.segment_sum(jnp.asarray(values), jnp.asarray(clusters), n_clusters)
    counts = jax.ops.segment_sum(jnp.ones(len(clusters)), jnp.asarray(clusters), n_clusters)
    low, high = _percentile_means(key, sums, counts, n_resamples=int(n_resamples), confidence=float(confidence))
    return ClusterBootstrapResult(jnp.asarray(values.mean(axis=0)), low, high, n_clusters)


@functools.partial(jax.jit, static_argnames="n_resamples")
def _percentile_means(key, sums: Float[Array, "C K"], counts: Float[Array, " C"], *, n_resamples: int, confidence):
    C = counts.shape[0]
    chunk = min(_CHUNK, n_resamples)
    steps = -(-n_resamples // chunk)  # the last step padded with the first keys again, then cut off
    keys = jax.random.split(key, n_resamples)[jnp.arange(steps * chunk) % n_resamples].reshape(steps, chunk)

    def means(chunk):
        drawn = jax.vmap(lambda k: jax.random.randint(k, (C,), 0, C))(chunk)
        weights = jax.vmap(lambda d: jnp.zeros(C).at[d].add(1.0))(drawn)  # (chunk, C): times each is drawn
        return (weights @ sums) / (weights @ counts)[:, None]

    samples = jax.lax.map(means, keys).reshape(-1, sums.shape[1])[:n_resamples]
    alpha = 1.0 - confidence
    low, high = jnp.quantile(samples, jnp.stack([alpha / 2, 1 - alpha / 2]).astype(samples.dtype), axis=0)
    return low, high


__all__ = ["ClusterBootstrapResult", "cluster_bootstrap_means", "cluster_codes"]
