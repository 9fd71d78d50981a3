"""Paired comparisons of two scorings of the same items (e.g. a model with and without a debiasing
intervention; docs/methods.md §11.11).

- :func:`mcnemar_exact`: McNemar's exact test of a binary outcome measured twice on the same items: of
  the discordant items, ``b`` changed 1 -> 0 and ``c`` 0 -> 1; under H0 (no change in the rate) each is
  1 -> 0 with probability 1/2, so the two-sided p is the exact binomial test of min(b, c) of b + c against
  1/2 (:func:`jaxassoc.stats.binomial.binomial_test`); p = 1 with no discordant item.
- :func:`paired_mean_difference`: mean(a) - mean(b) of per-item values with a paired percentile bootstrap
  over items (:func:`jaxassoc.stats.bootstrap.paired_bootstrap`: each resample draws the same items for
  both), its CI and two-sided bootstrap p.
- :func:`paired_effect_size_difference`: d(a) - d(b) of WEAT's effect size (Caliskan et al. 2017, eq. 3)
  computed from per-item association scores of the same targets; the targets are resampled within X and
  within Y (|X| and |Y| fixed, as WEAT's own CI), each draw the same targets for both, and the p is the
  same two-sided bootstrap p as :func:`~jaxassoc.stats.bootstrap.paired_bootstrap`'s.

Resample r uses ``jax.random.split(key, n_resamples)[r]`` (:mod:`jaxassoc.stats.bootstrap`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from jaxassoc.errors import InputError
from jaxassoc.stats.binomial import binomial_test
from jaxassoc.stats.bootstrap import PairedBootstrapResult, _two_sided_p, bootstrap_ci_groups, paired_bootstrap
from jaxassoc.stats.options import StatsOptions


class McNemarResult(NamedTuple):
    """Discordant counts (``b``: 1 -> 0, ``c``: 0 -> 1) and the exact two-sided p of b = c."""

    b: int
    c: int
    p_value: float


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact McNemar test: two-sided exact binomial p of min(b, c) in b + c trials at 1/2; 1 when b + c = 0."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise InputError(f"mcnemar_exact: the discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return McNemarResult(b, c, 1.0)
    return McNemarResult(b, c, binomial_test(min(b, c), b + c, p0=0.5, alternative="two-sided").p_value)


def discordant(before: ArrayLike, after: ArrayLike) -> tuple[int, int]:
    """``(b, c)``: items whose binary outcome went 1 -> 0 and 0 -> 1 from ``before`` to ``after``."""
    before, after = np.asarray(before, bool), np.asarray(after, bool)
    if before.shape != after.shape or before.ndim != 1:
        raise InputError(f"discordant: need two outcome vectors of one length, got {before.shape} and {after.shape}")
    return int((before & ~after).sum()), int((~before & after).sum())


def _first_mean(a: Float[Array, " n"], b: Float[Array, " n"]) -> Float[Array, ""]:
    return jnp.mean(a)


def _second_mean(a: Float[Array, " n"], b: Float[Array, " n"]) -> Float[Array, ""]:
    return jnp.mean(b)


def _paired(a: ArrayLike, b: ArrayLike, what: str) -> tuple[Array, Array]:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise InputError(f"{what}: need two per-item vectors of one length >= 2, got {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise InputError(f"{what}: the per-item values must be finite")
    return jnp.asarray(a), jnp.asarray(b)


def paired_mean_difference(
    key: PRNGKeyArray,
    a: Float[ArrayLike, " n"],
    b: Float[ArrayLike, " n"],
    *,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
) -> PairedBootstrapResult:
    """mean(a) - mean(b) of two values per item (row i of both: the same item), with the paired percentile
    bootstrap CI and two-sided p of :func:`~jaxassoc.stats.bootstrap.paired_bootstrap`."""
    a, b = _paired(a, b, "paired_mean_difference")
    return paired_bootstrap(key, _first_mean, _second_mean, (a, b), n_resamples=n_resamples, confidence=confidence)


def effect_size(s_x: Float[Array, " nx"], s_y: Float[Array, " ny"], ddof: int) -> Float[Array, ""]:
    """WEAT's d: (mean_X s - mean_Y s) / std_{X ∪ Y} s (``ddof`` 1: Caliskan et al.; 0: WEFE)."""
    return (s_x.mean() - s_y.mean()) / jnp.std(jnp.concatenate([s_x, s_y]), ddof=ddof)


def _delta_d(x: tuple[Array, Array], y: tuple[Array, Array], *, ddof: int) -> Float[Array, ""]:
    return effect_size(x[0], y[0], ddof) - effect_size(x[1], y[1], ddof)


def paired_effect_size_difference(
    key: PRNGKeyArray,
    scores_a: Float[ArrayLike, " n"],
    scores_b: Float[ArrayLike, " n"],
    in_x: ArrayLike,
    *,
    ddof: int = StatsOptions.ddof,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
) -> PairedBootstrapResult:
    """d(a) - d(b): WEAT effect sizes of two association scores per target (``in_x``: the target is in X,
    else in Y), with a paired bootstrap that resamples X's and Y's targets separately and scores each draw
    with both; percentile CI and two-sided p as :func:`~jaxassoc.stats.bootstrap.paired_bootstrap`."""
    a, b = _paired(scores_a, scores_b, "paired_effect_size_difference")
    in_x = np.asarray(in_x, bool)
    if in_x.shape != a.shape or in_x.sum() < 1 or (~in_x).sum() < 1 or len(a) < 3:
        raise InputError("paired_effect_size_difference: need at least one target in X and one in Y (three in all)")
    x, y = np.flatnonzero(in_x), np.flatnonzero(~in_x)
    statistic = functools.partial(_delta_d, ddof=int(ddof))
    result = bootstrap_ci_groups(
        key, statistic, ((a[x], b[x]), (a[y], b[y])), n_resamples=n_resamples, confidence=confidence
    )
    return PairedBootstrapResult(
        result.estimate, result.low, result.high, _two_sided_p(result.estimate, result.samples)
    )
