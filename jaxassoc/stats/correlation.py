"""Rank and correlation statistics (docs/methods.md §5), jit-compiled, matching ``scipy.stats``.

- ``rankdata``: average ranks for ties (scipy's default ``method="average"``).
- ``pearson``, ``spearman``, ``kendall_tau_b``: the coefficients as float32 scalars.
- ``pearson_test``, ``spearman_test``, ``kendall_test``: the coefficient with scipy's two-sided p-value.

``nan_policy="propagate"`` returns NaN when any value is NaN (as scipy); ``"omit"`` keeps the
pairwise-complete pairs (neither value NaN) through a mask, so it runs under ``jit`` without boolean
indexing. A constant input (after omitting) or fewer than two pairs gives NaN, as scipy (which warns).

Inputs are cast to float32 (values that differ only beyond float32 precision become ties) and p-values
are computed in float32 with ``jax.scipy.special``: a p below ~1e-38 underflows to 0.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc, erfc
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ConfigError, InputError

NAN_POLICIES = ("propagate", "omit")

# Kendall's pair counts are exact int32 sums over the n x n sign matrix: n^2 must stay below 2^31.
_KENDALL_MAX_N = 46_340
# Rows of the sign matrix evaluated at once: bounds Kendall's memory to _KENDALL_ROWS x n.
_KENDALL_ROWS = 256


class CorrelationResult(NamedTuple):
    """A correlation coefficient with its two-sided p-value (scipy's definition for each test)."""

    statistic: Float[Array, ""]
    p_value: Float[Array, ""]


def _check_inputs(x, y, what: str, nan_policy: str) -> tuple[Array, Array]:
    """Validate shapes and policy before tracing; return float32 arrays."""
    if nan_policy not in NAN_POLICIES:
        raise ConfigError(f"{what}: nan_policy={nan_policy!r} is not supported: use 'propagate' or 'omit'.")
    if np.ndim(x) != 1 or np.ndim(y) != 1:
        raise InputError(f"{what}: x and y must be 1-D arrays; got shapes {np.shape(x)} and {np.shape(y)}.")
    if np.shape(x) != np.shape(y):
        raise InputError(
            f"{what}: x and y must have the same length (one value per pair); got {np.shape(x)[0]} and {np.shape(y)[0]}."
        )
    if np.shape(x)[0] < 2:
        raise InputError(f"{what}: needs at least 2 pairs; got {np.shape(x)[0]}.")
    return jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)


def _valid_mask(x: Float[Array, " n"], y: Float[Array, " n"], omit: bool) -> Bool[Array, " n"]:
    """Pairs that enter the statistic: pairwise-complete ones under "omit", all under "propagate"."""
    if omit:
        return ~(jnp.isnan(x) | jnp.isnan(y))
    return jnp.ones(x.shape, bool)


def _propagate(value: Array, x: Array, y: Array, omit: bool) -> Array:
    """NaN if any input is NaN under "propagate"."""
    if omit:
        return value
    return jnp.where(jnp.any(jnp.isnan(x)) | jnp.any(jnp.isnan(y)), jnp.nan, value)


def _tie_groups(x: Float[Array, " n"], valid: Bool[Array, " n"]) -> tuple[Array, Array]:
    """For each entry, the 0-based first and last sorted position of its group of equal valid values.

    One argsort (invalid entries become NaN, which sorts last and equals nothing), group bounds by
    running max/min over the sorted order, and a scatter back to the input order.
    """
    n = x.shape[0]
    order = jnp.argsort(jnp.where(valid, x, jnp.nan))
    s = jnp.where(valid, x, jnp.nan)[order]
    position = jnp.arange(n)
    starts = jnp.concatenate([jnp.array([True]), s[1:] != s[:-1]])
    ends = jnp.concatenate([s[1:] != s[:-1], jnp.array([True])])
    first = jax.lax.cummax(jnp.where(starts, position, 0))
    last = jax.lax.cummin(jnp.where(ends, position, n - 1), reverse=True)
    return jnp.zeros(n, position.dtype).at[order].set(first), jnp.zeros(n, position.dtype).at[order].set(last)


def _masked_ranks(x: Float[Array, " n"], valid: Bool[Array, " n"]) -> Float[Array, " n"]:
    """Average ranks (1-based) of the valid entries among themselves; NaN at invalid entries.

    A group of ties at sorted positions first..last (0-based) gets rank (first + last) / 2 + 1.
    """
    first, last = _tie_groups(x, valid)
    return jnp.where(valid, (first + last) / 2.0 + 1.0, jnp.nan).astype(jnp.float32)


def _tie_counts(x: Float[Array, " n"], valid: Bool[Array, " n"]) -> Int[Array, " n"]:
    """For each valid entry, how many valid entries (itself included) share its value; 0 at invalid ones."""
    first, last = _tie_groups(x, valid)
    return jnp.where(valid, last - first + 1, 0)


def _is_constant(x: Float[Array, " n"], valid: Bool[Array, " n"]) -> Bool[Array, ""]:
    """All valid entries equal (scipy returns NaN for a constant input)."""
    hi = jnp.max(jnp.where(valid, x, -jnp.inf))
    lo = jnp.min(jnp.where(valid, x, jnp.inf))
    return hi == lo


def _masked_pearson(x: Float[Array, " n"], y: Float[Array, " n"], valid: Bool[Array, " n"]) -> Float[Array, ""]:
    """Pearson r over the valid pairs, centred and scaled first for float32 accuracy (as scipy)."""
    w = valid.astype(jnp.float32)
    n = jnp.sum(w)
    x = jnp.where(valid, x, 0.0)
    y = jnp.where(valid, y, 0.0)
    xc = (x - jnp.sum(x) / n) * w
    yc = (y - jnp.sum(y) / n) * w
    xc = xc / jnp.max(jnp.abs(xc))
    yc = yc / jnp.max(jnp.abs(yc))
    r = jnp.sum(xc * yc) / (jnp.sqrt(jnp.sum(xc * xc)) * jnp.sqrt(jnp.sum(yc * yc)))
    degenerate = (n < 2) | _is_constant(x, valid) | _is_constant(y, valid)
    return jnp.where(degenerate, jnp.nan, jnp.clip(r, -1.0, 1.0))


def _t_test_p(r: Float[Array, ""], dof: Float[Array, ""]) -> Float[Array, ""]:
    """Two-sided p of H0: rho = 0 with t = r sqrt(dof / (1 - r^2)) ~ t(dof): p = I_{1-r^2}(dof/2, 1/2)."""
    return betainc(dof / 2.0, 0.5, jnp.clip(1.0 - r * r, 0.0, 1.0))


@jax.jit
def rankdata(x: Float[Array, " n"]) -> Float[Array, " n"]:
    """Ranks 1..n with ties given their average rank (``scipy.stats.rankdata``); all NaN if any is NaN."""
    x = jnp.asarray(x, jnp.float32)
    ranks = _masked_ranks(x, jnp.ones(x.shape, bool))
    return jnp.where(jnp.any(jnp.isnan(x)), jnp.nan, ranks)


@partial(jax.jit, static_argnames="omit")
def _pearson(x, y, omit: bool) -> tuple[Array, Array]:
    valid = _valid_mask(x, y, omit)
    r = _propagate(_masked_pearson(x, y, valid), x, y, omit)
    return r, jnp.sum(valid).astype(jnp.float32)


@partial(jax.jit, static_argnames="omit")
def _spearman(x, y, omit: bool) -> tuple[Array, Array]:
    valid = _valid_mask(x, y, omit)
    rho = _masked_pearson(_masked_ranks(x, valid), _masked_ranks(y, valid), valid)
    return _propagate(rho, x, y, omit), jnp.sum(valid).astype(jnp.float32)


def _kendall_row_sums(xi, yi, vi, x, y, valid):
    """Sums over j of sgn(x_i - x_j) sgn(y_i - y_j), sgn(x_i - x_j)^2 and sgn(y_i - y_j)^2 (valid pairs)."""
    both = vi & valid
    sx = jnp.where(both, (xi > x).astype(jnp.int32) - (xi < x).astype(jnp.int32), 0)
    sy = jnp.where(both, (yi > y).astype(jnp.int32) - (yi < y).astype(jnp.int32), 0)
    return jnp.stack([jnp.sum(sx * sy), jnp.sum(sx * sx), jnp.sum(sy * sy)])


@partial(jax.jit, static_argnames="omit")
def _kendall(x, y, omit: bool) -> tuple[Array, Array]:
    """tau-b and scipy's asymptotic two-sided p (normal approximation with tie-corrected variance)."""
    valid = _valid_mask(x, y, omit)
    rows = jax.lax.map(
        lambda row: _kendall_row_sums(*row, x, y, valid), (x, y, valid), batch_size=min(_KENDALL_ROWS, x.shape[0])
    )
    # Each unordered pair appears twice in the full matrix.
    con_minus_dis, untied_x, untied_y = (jnp.sum(rows, axis=0) // 2).astype(jnp.float32)
    tau = jnp.clip(con_minus_dis / (jnp.sqrt(untied_x) * jnp.sqrt(untied_y)), -1.0, 1.0)

    # scipy.stats.kendalltau(method="asymptotic"): var(C - D) with tie corrections; sums over tie groups
    # of f(t) are sums over entries of f(t_i) / t_i.
    n = jnp.sum(valid).astype(jnp.float32)
    m = n * (n - 1.0)
    tx = _tie_counts(x, valid).astype(jnp.float32)
    ty = _tie_counts(y, valid).astype(jnp.float32)
    xtie, ytie = jnp.sum(jnp.maximum(tx - 1.0, 0.0)) / 2.0, jnp.sum(jnp.maximum(ty - 1.0, 0.0)) / 2.0
    x0 = jnp.sum(jnp.where(tx > 0, (tx - 1.0) * (tx - 2.0), 0.0))
    y0 = jnp.sum(jnp.where(ty > 0, (ty - 1.0) * (ty - 2.0), 0.0))
    x1 = jnp.sum(jnp.where(tx > 0, (tx - 1.0) * (2.0 * tx + 5.0), 0.0))
    y1 = jnp.sum(jnp.where(ty > 0, (ty - 1.0) * (2.0 * ty + 5.0), 0.0))
    var = (m * (2.0 * n + 5.0) - x1 - y1) / 18.0 + 2.0 * xtie * ytie / m + x0 * y0 / (9.0 * m * (n - 2.0))
    p = erfc(jnp.abs(con_minus_dis) / jnp.sqrt(2.0 * var))

    degenerate = (n < 2) | (untied_x == 0) | (untied_y == 0)
    tau = _propagate(jnp.where(degenerate, jnp.nan, tau), x, y, omit)
    return tau, jnp.where(jnp.isnan(tau), jnp.nan, p)


def pearson(x: Float[Array, " n"], y: Float[Array, " n"], *, nan_policy: str = "propagate") -> Float[Array, ""]:
    """Pearson's product-moment correlation r (``scipy.stats.pearsonr(x, y).statistic``)."""
    x, y = _check_inputs(x, y, "pearson", nan_policy)
    return _pearson(x, y, nan_policy == "omit")[0]


def spearman(x: Float[Array, " n"], y: Float[Array, " n"], *, nan_policy: str = "propagate") -> Float[Array, ""]:
    """Spearman's rho: Pearson r of the average ranks (``scipy.stats.spearmanr(x, y).statistic``)."""
    x, y = _check_inputs(x, y, "spearman", nan_policy)
    return _spearman(x, y, nan_policy == "omit")[0]


def kendall_tau_b(x: Float[Array, " n"], y: Float[Array, " n"], *, nan_policy: str = "propagate") -> Float[Array, ""]:
    """Kendall's tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)) (``scipy.stats.kendalltau(x, y).statistic``).

    C - D is counted exactly over all pairs (O(n^2) work in blocks of rows, O(n) memory per row).
    """
    x, y = _check_inputs(x, y, "kendall_tau_b", nan_policy)
    _check_kendall_size(x.shape[0])
    return _kendall(x, y, nan_policy == "omit")[0]


def pearson_test(x: Float[Array, " n"], y: Float[Array, " n"], *, nan_policy: str = "propagate") -> CorrelationResult:
    """Pearson r and its two-sided p under bivariate normality (t with n - 2 dof; scipy's ``pearsonr``).

    With exactly two pairs r = +-1 and p = 1, as scipy.
    """
    x, y = _check_inputs(x, y, "pearson_test", nan_policy)
    r, n = _pearson(x, y, nan_policy == "omit")
    p = jnp.where(n == 2, 1.0, _t_test_p(r, n - 2.0))
    return CorrelationResult(r, jnp.where(jnp.isnan(r), jnp.nan, p))


def spearman_test(x: Float[Array, " n"], y: Float[Array, " n"], *, nan_policy: str = "propagate") -> CorrelationResult:
    """Spearman rho and scipy's two-sided p: t = rho sqrt((n - 2) / (1 - rho^2)) ~ t(n - 2) (``spearmanr``)."""
    x, y = _check_inputs(x, y, "spearman_test", nan_policy)
    rho, n = _spearman(x, y, nan_policy == "omit")
    p = jnp.where(n < 3, jnp.nan, _t_test_p(rho, n - 2.0))
    return CorrelationResult(rho, jnp.where(jnp.isnan(rho), jnp.nan, p))


def kendall_test(x: Float[Array, " n"], y: Float[Array, " n"], *, nan_policy: str = "propagate") -> CorrelationResult:
    """Kendall tau-b and the two-sided p of ``scipy.stats.kendalltau(x, y, method="asymptotic")``.

    z = (C - D) / sqrt(var), var with scipy's tie correction; p = 2 (1 - Phi(|z|)).
    """
    x, y = _check_inputs(x, y, "kendall_test", nan_policy)
    _check_kendall_size(x.shape[0])
    return CorrelationResult(*_kendall(x, y, nan_policy == "omit"))


def _check_kendall_size(n: int) -> None:
    if n > _KENDALL_MAX_N:
        raise InputError(
            f"kendall_tau_b: at most {_KENDALL_MAX_N} pairs are supported (exact int32 pair counts); got {n}."
        )
