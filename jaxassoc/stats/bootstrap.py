"""Percentile bootstrap: joint, stratified (per group) and paired (docs/methods.md §2, §5; Efron & Tibshirani
1993, ch. 13).

Resample r draws its rows with ``jax.random.split(key, n_resamples)[r]``, so the drawn rows depend only
on the key and ``n_resamples``, not on how many resamples are evaluated at once (chosen to keep the
resampled copies within about 64 MiB; only float rounding in a vectorised statistic may differ). The
statistic is a static argument of ``jit``: pass a module-level function (or a ``functools.partial`` of
one, which compares equal to its twins); a new lambda compiles anew on every call.

The CI is the percentile interval: the (1 - confidence)/2 and (1 + confidence)/2 quantiles of the
resampled statistics, linearly interpolated (numpy's default, as ``scipy.stats.bootstrap(...,
method="percentile")``). Beside a one-sided test (``alternative="greater"``) it is one-sided too: the
(1 - confidence) quantile up to +inf (``"less"``: -inf up to the confidence quantile), so that the interval
excludes 0 where the test rejects at 1 - confidence (docs/methods.md §5.8). A resample whose statistic is
NaN (e.g. a constant resample of a correlation) makes the interval NaN, as in scipy: check ``samples``.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int32, PRNGKeyArray, UInt32

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.stats.compilation import by_work
from jaxassoc.stats.keys import check_key
from jaxassoc.stats.options import DEFAULT_ALTERNATIVE, StatsOptions

# Memory for the resampled copies of the data evaluated at once. The statistic's own temporaries are a
# multiple of it (Spearman of 1,500 pairs: ~5x); 16 MB ran as fast as 64 MB with half the peak memory.
_BATCH_BYTES = 16 * 2**20
MAX_RESAMPLES = 10**7
"""Most bootstrap resamples: their keys and statistics take about 120 MB."""


class BootstrapResult(NamedTuple):
    """Statistic on the original data, percentile CI bounds, and every resampled statistic."""

    estimate: Float[Array, ""]
    low: Float[Array, ""]
    high: Float[Array, ""]
    samples: Float[Array, " R"]


class PairedBootstrapResult(NamedTuple):
    """Observed difference a - b, its percentile CI, and the two-sided bootstrap p of a - b = 0."""

    difference: Float[Array, ""]
    low: Float[Array, ""]
    high: Float[Array, ""]
    p_value: Float[Array, ""]


def _as_group(what: str, group: Any, label: str) -> tuple[Array, ...]:
    """A group is an array or a tuple of arrays sharing their leading (row) axis, with at least one row."""
    arrays = tuple(group) if isinstance(group, (tuple, list)) else (group,)
    if not arrays:
        raise InputError(f"{what}: {label} holds no arrays.")
    arrays = tuple(jnp.asarray(a) for a in arrays)
    if any(a.ndim == 0 for a in arrays):
        raise InputError(f"{what}: {label} must be arrays with rows along axis 0; got a scalar.")
    rows = {a.shape[0] for a in arrays}
    if len(rows) != 1:
        raise InputError(
            f"{what}: the arrays of {label} are resampled jointly along axis 0 and need the same number of rows; "
            f"got shapes {[a.shape for a in arrays]}."
        )
    if rows == {0}:
        raise InputError(f"{what}: {label} has no rows to resample.")
    return arrays


def min_resamples(confidence: float) -> int:
    """The fewest resamples whose (1 - confidence)/2 and (1 + confidence)/2 percentiles are not the
    extremes of the draws: 2 / (1 - confidence), i.e. 40 for a 95 % CI and 200 for a 99 % one."""
    return math.ceil(2 / (1 - confidence) - 1e-9)


def _sided(alternative: str) -> str:
    if alternative not in ("two-sided", "greater", "less"):
        raise ConfigError(f"bootstrap: alternative={alternative!r} is not one of 'two-sided', 'greater', 'less'.")
    return alternative


def _check_settings(what: str, n_resamples, confidence) -> None:
    if (
        isinstance(n_resamples, bool)
        or not isinstance(n_resamples, (int, np.integer))
        or not 1 <= n_resamples <= MAX_RESAMPLES
    ):
        raise ConfigError(f"{what}: n_resamples must be an integer in 1..{MAX_RESAMPLES:,}; got {n_resamples!r}.")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float, np.floating)) or not 0 < confidence < 1:
        raise ConfigError(f"{what}: confidence must be strictly between 0 and 1 (e.g. 0.95); got {confidence!r}.")
    if n_resamples < min_resamples(confidence):
        raise ConfigError(
            f"{what}: n_resamples={n_resamples} is too few for a {confidence:.0%} CI: its percentiles would be the "
            f"extremes of the draws; use at least {min_resamples(confidence)} (2 / (1 - confidence)), e.g. 10,000."
        )


def _batch_size(groups: tuple[tuple[Array, ...], ...], n_resamples: int) -> int:
    """Resamples per step: within _BATCH_BYTES of resampled copies, spread evenly over the steps."""
    per_resample = sum(a.size * a.dtype.itemsize for g in groups for a in g)
    most = int(np.clip(_BATCH_BYTES // max(per_resample, 1), 1, n_resamples))
    steps = -(-n_resamples // most)
    return -(-n_resamples // steps)


def _work(groups, n_resamples: int) -> int:
    """Elements resampled in all: what the kernel's run time grows with (``compilation.by_work``)."""
    return int(n_resamples) * sum(a.size for g in groups for a in g)


def _row_indices(bits: UInt32[Array, " n"], n: int) -> Int32[Array, " n"]:
    """floor(bits * n / 2^32), uniform on 0..n-1 up to a relative bias below n / 2^32 (Lemire 2019).

    The high word of the 64-bit product is formed from 16-bit halves, exact for n < 2^16.
    """
    high = (bits >> 16) * jnp.uint32(n)
    low = ((bits & 0xFFFF) * jnp.uint32(n)) >> 16
    return ((high + low) >> 16).astype(jnp.int32)


def _resample(key: PRNGKeyArray, groups: tuple[tuple[Array, ...], ...]) -> tuple[tuple[Array, ...], ...]:
    """Rows drawn with replacement, independently within each group, jointly across a group's arrays."""
    sizes = [group[0].shape[0] for group in groups]
    if max(sizes) >= 2**16:
        keys = jax.random.split(key, len(groups))
        indices = [jax.random.randint(k, (n,), 0, n) for k, n in zip(keys, sizes)]
    else:  # one random draw for all groups: cheaper to compile and to run
        bits = jax.random.bits(key, (sum(sizes),), jnp.uint32)
        offsets = np.cumsum([0] + sizes)
        indices = [_row_indices(bits[o : o + n], n) for o, n in zip(offsets, sizes)]
    return tuple(tuple(a[idx] for a in group) for idx, group in zip(indices, groups))


@by_work("fn", "n_resamples", "batch_size")
def _bootstrap(key, groups, *, fn, n_resamples: int, batch_size: int) -> tuple[Array, Array]:
    """fn(groups) on the original data and on each resample, batch_size resamples per step.

    The last step is padded with repeats of the first keys (one compiled body), then cut off.
    """
    estimate = fn(groups)
    if jnp.shape(estimate) != ():
        raise InputError(f"bootstrap: the statistic must return a scalar; it returned shape {jnp.shape(estimate)}.")
    keys = jax.random.split(key, n_resamples)
    steps = -(-n_resamples // batch_size)
    keys = jnp.concatenate([keys, keys[: steps * batch_size - n_resamples]]).reshape(steps, batch_size)
    resampled = jax.lax.map(jax.vmap(lambda k: fn(_resample(k, groups))), keys)
    return estimate, resampled.reshape(-1)[:n_resamples]


@functools.partial(jax.jit, static_argnames="alternative")
def _percentile_ci(samples: Float[Array, " R"], confidence: Float[Array, ""], alternative: str) -> tuple[Array, Array]:
    """The (1 - confidence)/2 and (1 + confidence)/2 quantiles, linearly interpolated (numpy's default);
    one-sided: [the 1 - confidence quantile, +inf) (``"greater"``) or (-inf, the confidence quantile]."""
    alpha = 1.0 - confidence
    low, high = jnp.quantile(samples, jnp.stack([alpha / 2, 1 - alpha / 2]).astype(samples.dtype))
    if alternative == "greater":
        low, high = jnp.quantile(samples, alpha.astype(samples.dtype)), jnp.full_like(high, jnp.inf)
    elif alternative == "less":
        low, high = jnp.full_like(low, -jnp.inf), jnp.quantile(samples, (1 - alpha).astype(samples.dtype))
    return low, high


@jax.jit
def _two_sided_p(difference: Float[Array, ""], samples: Float[Array, " R"]) -> Float[Array, ""]:
    """min(1, 2 (c + 1) / (R + 1)), c = resampled differences on the other side of 0 (see paired_bootstrap)."""
    other_side = jnp.where(difference >= 0, samples <= 0, samples >= 0)
    p = jnp.minimum(1.0, 2.0 * (jnp.sum(other_side) + 1) / (samples.shape[0] + 1))
    return jnp.where(jnp.any(jnp.isnan(samples)) | jnp.isnan(difference), jnp.nan, p).astype(samples.dtype)


class _JointStatistic(NamedTuple):
    """statistic(*arrays) of the single jointly resampled group; hashable, so jit caches per statistic."""

    statistic: Callable

    def __call__(self, groups):
        return self.statistic(*groups[0])


class _JointDifference(NamedTuple):
    """statistic_a(*arrays) - statistic_b(*arrays) on the same rows."""

    statistic_a: Callable
    statistic_b: Callable

    def __call__(self, groups):
        return self.statistic_a(*groups[0]) - self.statistic_b(*groups[0])


class _GroupStatistic(NamedTuple):
    """statistic(*groups), passing a one-array group as the bare array unless it was given as a tuple."""

    statistic: Callable
    as_tuple: tuple[bool, ...]

    def __call__(self, groups):
        return self.statistic(*(g if t else g[0] for g, t in zip(groups, self.as_tuple)))


def bootstrap_ci(
    key: PRNGKeyArray,
    statistic: Callable[..., Float[Array, ""]],
    data: tuple[Array, ...],
    *,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
    alternative: str = DEFAULT_ALTERNATIVE,
) -> BootstrapResult:
    """Percentile bootstrap CI of ``statistic(*data)``; the arrays of ``data`` are resampled jointly by row.

    Rows are the units (stimuli): each resample draws n row indices with replacement and applies them to
    every array of ``data`` (a bare array counts as a one-array tuple). ``statistic`` is vmapped over
    resamples and must return a scalar.
    """
    _check_settings("bootstrap_ci", n_resamples, confidence)
    key = check_key("bootstrap_ci", key)
    group = _as_group("bootstrap_ci", data, "data")
    fn = _JointStatistic(statistic)
    batch = _batch_size((group,), int(n_resamples))
    estimate, samples = _bootstrap(
        key, (group,), fn=fn, n_resamples=int(n_resamples), batch_size=batch, work=_work((group,), n_resamples)
    )
    return BootstrapResult(estimate, *_percentile_ci(samples, float(confidence), _sided(alternative)), samples)


def bootstrap_ci_groups(
    key: PRNGKeyArray,
    statistic: Callable[..., Float[Array, ""]],
    groups: tuple[Any, ...],
    *,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
    alternative: str = DEFAULT_ALTERNATIVE,
) -> BootstrapResult:
    """Stratified percentile bootstrap: each group is resampled independently within itself.

    ``groups`` is a tuple with one entry per stratum, each an array or a tuple of arrays resampled jointly
    by row; ``statistic(*groups)`` receives them in the same structure. E.g. WEAT's effect size over
    stimuli: ``bootstrap_ci_groups(key, effect_size, (s_X, s_Y))`` keeps |X| and |Y| fixed.
    """
    _check_settings("bootstrap_ci_groups", n_resamples, confidence)
    key = check_key("bootstrap_ci_groups", key)
    if not isinstance(groups, (tuple, list)) or not groups:
        raise InputError("bootstrap_ci_groups: groups must be a non-empty tuple (one entry per stratum).")
    structured = tuple(_as_group("bootstrap_ci_groups", g, f"group {i}") for i, g in enumerate(groups))
    fn = _GroupStatistic(statistic, tuple(isinstance(g, (tuple, list)) for g in groups))
    batch = _batch_size(structured, int(n_resamples))
    estimate, samples = _bootstrap(
        key, structured, fn=fn, n_resamples=int(n_resamples), batch_size=batch, work=_work(structured, n_resamples)
    )
    return BootstrapResult(estimate, *_percentile_ci(samples, float(confidence), _sided(alternative)), samples)


def paired_bootstrap(
    key: PRNGKeyArray,
    statistic_a: Callable[..., Float[Array, ""]],
    statistic_b: Callable[..., Float[Array, ""]],
    data: tuple[Array, ...],
    *,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
) -> PairedBootstrapResult:
    """Paired bootstrap of the difference ``statistic_a(*data) - statistic_b(*data)``.

    Each resample feeds the same rows to both statistics (e.g. Spearman of raw and of whitened cosines
    against the same human scores), so the CI and p account for their correlation.

    Two-sided p of H0: difference = 0. With d the observed difference and d_r the R resampled ones, let
    c = #{r : d_r <= 0} if d >= 0, else #{r : d_r >= 0} (the resamples on the other side of 0, zeros
    included); p = min(1, 2 (c + 1) / (R + 1)). The +1 keeps p away from an impossible 0: its floor is
    2 / (R + 1). NaN if any resampled difference is NaN.
    """
    _check_settings("paired_bootstrap", n_resamples, confidence)
    key = check_key("paired_bootstrap", key)
    group = _as_group("paired_bootstrap", data, "data")
    fn = _JointDifference(statistic_a, statistic_b)
    batch = _batch_size((group,), int(n_resamples))
    difference, samples = _bootstrap(
        key, (group,), fn=fn, n_resamples=int(n_resamples), batch_size=batch, work=_work((group,), n_resamples)
    )
    low, high = _percentile_ci(samples, float(confidence), "two-sided")  # beside its two-sided p
    return PairedBootstrapResult(difference, low, high, _two_sided_p(difference, samples))
