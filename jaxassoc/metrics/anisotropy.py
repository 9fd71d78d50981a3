"""Anisotropy of an embedding space (ZCA-WEAT paper, Experiment 1; Ethayarajh 2019).

Mean ± SD of the pairwise cosine similarity of randomly sampled vectors (off-diagonal pairs; 0 for an
isotropic space), the explained-variance spectrum of their covariance, and the cosine matrix itself
(the paper's Figure 1).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from jaxassoc.metrics.weat import unit_rows
from jaxassoc.stats.keys import check_key


class Anisotropy(NamedTuple):
    """Mean and SD (ddof 0) of the cosine over the n(n-1)/2 distinct pairs of sampled vectors."""

    mean: Float[Array, ""]
    sd: Float[Array, ""]


def cosine_matrix(x: Float[Array, "n D"]) -> Float[Array, "n n"]:
    """All pairwise cosines of the rows of ``x``."""
    unit = unit_rows(x)
    return unit @ unit.T


@jax.jit
def pairwise_cosine(x: Float[Array, "n D"]) -> Anisotropy:
    """Mean ± SD of cos(x_i, x_j) over i < j."""
    cos = cosine_matrix(x)
    n = x.shape[0]
    off = ~jnp.eye(n, dtype=bool)
    mean = jnp.sum(jnp.where(off, cos, 0.0)) / (n * (n - 1))
    var = jnp.sum(jnp.where(off, (cos - mean) ** 2, 0.0)) / (n * (n - 1))
    return Anisotropy(mean=mean, sd=jnp.sqrt(var))


@functools.partial(jax.jit, static_argnames=("n_samples",))
def sample_rows(key: PRNGKeyArray, x: Float[Array, "N D"], n_samples: int = 2000) -> Float[Array, "n D"]:
    """``min(n_samples, N)`` distinct rows drawn uniformly with ``key``."""
    n = min(n_samples, x.shape[0])
    return x[jax.random.choice(check_key("sample_rows", key), x.shape[0], (n,), replace=False)]


def anisotropy(key: PRNGKeyArray, x: Float[Array, "N D"], *, n_samples: int = 2000) -> Anisotropy:
    """Experiment 1: pairwise-cosine statistics of ``n_samples`` random rows of ``x``."""
    return pairwise_cosine(sample_rows(key, x, n_samples))


@jax.jit
def explained_variance_ratio(x: Float[Array, "n D"]) -> Float[Array, " D"]:
    """Eigenvalues of the covariance of ``x`` (ddof 1), descending, divided by their sum (Figure 2); ``x``
    is scaled to max |entry| 1 first, so that the covariance neither overflows nor underflows float32."""
    centred = x - x.mean(axis=0)
    centred = centred / jnp.max(jnp.abs(centred))
    eigenvalues = jnp.linalg.eigvalsh(centred.T @ centred / (x.shape[0] - 1))[::-1]
    eigenvalues = jnp.maximum(eigenvalues, 0.0)
    return eigenvalues / eigenvalues.sum()
