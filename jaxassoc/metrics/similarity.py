"""Cosine similarity vs human judgements (ZCA-WEAT paper, Experiment 2).

Spearman rho between the cosine of each pair's vectors and the human score (WordSim-353, SimLex-999 with
word vectors; STS-B with sentence vectors), raw vs whitened, with a paired bootstrap over pairs for the
difference (10,000 resamples in the paper).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxassoc import stats
from jaxassoc.metrics.weat import unit_rows
from jaxassoc.stats.keys import check_key


class SimilarityComparison(NamedTuple):
    """rho raw and whitened, their difference (whitened - raw) with its bootstrap CI and p-value."""

    rho_raw: Float[Array, ""]
    rho_whitened: Float[Array, ""]
    difference: Float[Array, ""]
    ci_low: Float[Array, ""]
    ci_high: Float[Array, ""]
    p_value: Float[Array, ""]
    n_pairs: Int[Array, ""]


@jax.jit
def pair_cosines(u: Float[Array, "n D"], v: Float[Array, "n D"]) -> Float[Array, " n"]:
    """cos(u_i, v_i) for each pair i."""
    return jnp.sum(unit_rows(u) * unit_rows(v), axis=1)


def cosine_spearman(u: Float[Array, "n D"], v: Float[Array, "n D"], human: Float[Array, " n"]) -> Float[Array, ""]:
    """Spearman rho of pair cosines against human similarity scores."""
    return stats.spearman(pair_cosines(u, v), jnp.asarray(human))


def _rho_raw(cos_raw, cos_whitened, human):
    return stats.spearman(cos_raw, human)


def _rho_whitened(cos_raw, cos_whitened, human):
    return stats.spearman(cos_whitened, human)


def compare_whitening(
    key: PRNGKeyArray,
    raw: tuple[Float[Array, "n D"], Float[Array, "n D"]],
    whitened: tuple[Float[Array, "n D"], Float[Array, "n D"]],
    human: Float[Array, " n"],
    *,
    n_resamples: int = stats.StatsOptions.n_bootstrap,
    confidence: float = stats.StatsOptions.confidence,
) -> SimilarityComparison:
    """rho(raw) vs rho(whitened) on the same pairs; the bootstrap resamples pairs for both at once."""
    data = (pair_cosines(*raw), pair_cosines(*whitened), jnp.asarray(human))
    difference, low, high, p_value = stats.paired_bootstrap(
        check_key("compare_whitening", key),
        _rho_whitened,
        _rho_raw,
        data,
        n_resamples=n_resamples,
        confidence=confidence,
    )
    return SimilarityComparison(
        rho_raw=stats.spearman(data[0], data[2]),
        rho_whitened=stats.spearman(data[1], data[2]),
        difference=difference,
        ci_low=low,
        ci_high=high,
        p_value=p_value,
        n_pairs=jnp.asarray(data[2].shape[0]),
    )
