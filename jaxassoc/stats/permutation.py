"""Permutation test of a two-group statistic (docs/methods.md §2; Caliskan et al. 2017, WEAT p-value).

The items ``values[:n_x]`` form group X and the rest group Y. Under H0 the labels are exchangeable, so
the statistic's null distribution is its value over the re-partitions of X ∪ Y into groups of the same
sizes |X| and |Y|. By default (``ties="inclusive"``) the observed arrangement counts among them:

    exact:        p ("greater") = #{i : S(X_i, Y_i) >= S(X, Y)} / N          (>= 1/N)
    Monte Carlo:  p ("greater") = (#{i : S(X_i, Y_i) >= S(X, Y)} + 1) / (n + 1)   (>= 1/(n+1))

where N counts all C(n, |X|) partitions, the observed one included, and n the uniformly drawn ones
(Phipson & Smyth 2010; WEFE's and bias-bench's count), so p never reads below its resolution.
``ties="strict"`` is Eq. 4 of the ZCA-WEAT paper as printed (#{S_i > S} / N, without the +1), which can
read 0; the paper-reproduction scripts use it. Ties are decided with scipy's floating-point tolerance:
S_i and S count as equal when |S_i - S| <= 100 eps |S| (``eps`` of the statistic's dtype), so rounding in
a re-ordered sum never turns an exact tie into "greater".
"""

from __future__ import annotations

import functools
import itertools
import math
from functools import partial
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.stats.compilation import by_work
from jaxassoc.stats.keys import check_key
from jaxassoc.stats.options import ALTERNATIVES, TIES, StatsOptions

MAX_PARTITIONS = 10**7
"""Most partitions one test evaluates, enumerated (``exact_bound``) or drawn (``n_permutations``): a p
resolution of 1e-7, minutes of work and about 100 MB of index sets or keys at most."""

# Partitions evaluated per step: bounds memory to about _CHUNK x n (x batch) values per step.
_CHUNK = 4096
# Up to this n a random partition comes from one sort of position-tagged 32-bit keys (fast); above it
# from jax.random.permutation (exactly uniform for any n).
_TAGGED_MAX_N = 256
# scipy.stats.permutation_test's tie tolerance, in units of the statistic dtype's machine epsilon.
_TIE_EPS = 100


class PermutationResult(NamedTuple):
    """Observed statistic, p-value, whether all partitions were enumerated, and how many were used."""

    statistic: Float[Array, ""]
    p_value: Float[Array, ""]
    exact: Bool[Array, ""]
    n_resamples: Int[Array, ""]


def difference_of_sums(values: Float[Array, " n"], in_x: Bool[Array, " n"]) -> Float[Array, ""]:
    """WEAT's test statistic S = Σ_{x∈X} s(x) − Σ_{y∈Y} s(y) (Caliskan et al. 2017, Eq. 1)."""
    return jnp.sum(jnp.where(in_x, values, -values))


def difference_of_means(values: Float[Array, " n"], in_x: Bool[Array, " n"]) -> Float[Array, ""]:
    """mean_X − mean_Y: SC-WEAT's numerator, mean_A cos(w, a) − mean_B cos(w, b) (Caliskan et al. 2017, suppl.)."""
    n_x = jnp.sum(in_x)
    return jnp.sum(jnp.where(in_x, values, 0.0)) / n_x - jnp.sum(jnp.where(in_x, 0.0, values)) / (values.shape[0] - n_x)


@functools.lru_cache(maxsize=8)
def _combinations(n: int, n_x: int) -> np.ndarray:
    """All C(n, n_x) index sets of group X, (C, n_x), in lexicographic order; cached per (n, n_x)."""
    dtype = np.uint8 if n <= 256 else np.int32
    flat = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n), n_x)), dtype=dtype, count=math.comb(n, n_x) * n_x
    )
    return flat.reshape(-1, n_x)


def _chunked(x: Array, chunk: int) -> tuple[Array, Bool[Array, "c k"]]:
    """Pad the leading axis of ``x`` to a multiple of ``chunk`` (repeating row 0); reshape to (c, chunk, ...)."""
    total = x.shape[0]
    n_chunks = -(-total // chunk)
    pad = n_chunks * chunk - total
    padded = jnp.concatenate([x, jnp.broadcast_to(x[:1], (pad,) + x.shape[1:])]) if pad else x
    valid = jnp.arange(n_chunks * chunk) < total
    return padded.reshape((n_chunks, chunk) + x.shape[1:]), valid.reshape(n_chunks, chunk)


def _random_partition(key: PRNGKeyArray, n: int, n_x: int) -> Bool[Array, " n"]:
    """A uniformly random subset of size n_x of range(n), as a mask.

    For n <= 256: the n_x smallest of n random 32-bit keys whose low ceil(log2 n) bits are replaced by the
    position, which makes the keys distinct (one sort, no scatter). Positions only break ties in the
    remaining >= 24 random bits (probability < n^2 / 2^25 per partition, and harmless unless the tie
    straddles the cut). For larger n: the first n_x entries of ``jax.random.permutation``.
    """
    if n > _TAGGED_MAX_N:
        return jnp.zeros(n, bool).at[jax.random.permutation(key, n)[:n_x]].set(True)
    tag_bits = max(1, (n - 1).bit_length())
    bits = jax.random.bits(key, (n,), jnp.uint32)
    tagged = ((bits >> tag_bits) << tag_bits) | jnp.arange(n, dtype=jnp.uint32)
    return tagged <= jnp.sort(tagged)[n_x - 1]


def _exceedances(
    statistic: Callable,
    values: Float[Array, " n"],
    masks: Bool[Array, "k n"],
    valid: Bool[Array, " k"],
    observed: Float[Array, ""],
    ties: str,
) -> Int[Array, "2"]:
    """(#{S_i beyond S upwards}, #{S_i beyond S downwards}) among the valid masks, with the tie rule."""
    s = jax.vmap(statistic, in_axes=(None, 0))(values, masks)
    gamma = _TIE_EPS * jnp.finfo(s.dtype).eps * jnp.abs(observed)
    if ties == "strict":
        up, down = s > observed + gamma, s < observed - gamma
    else:
        up, down = s >= observed - gamma, s <= observed + gamma
    return jnp.stack([jnp.sum(up & valid), jnp.sum(down & valid)])


def _p_value(counts: Int[Array, "2"], total: int, alternative: str) -> Float[Array, ""]:
    """``counts`` of partitions beyond (or tied with) the observed one among ``total``; the observed
    arrangement already counted or, for Monte Carlo under "inclusive", added by the caller."""
    greater, less = counts[0] / total, counts[1] / total
    if alternative == "greater":
        return greater
    if alternative == "less":
        return less
    return jnp.minimum(1.0, 2.0 * jnp.minimum(greater, less))


def _observed(statistic: Callable, values: Float[Array, " n"], n_x: int) -> Float[Array, ""]:
    return statistic(values, jnp.arange(values.shape[0]) < n_x)


@by_work("statistic", "n_x", "alternative", "ties")
def _exact_test(combos, values, *, statistic, n_x, alternative, ties) -> PermutationResult:
    """Enumerate every partition: combos holds the X index sets (C, n_x)."""
    n, total = values.shape[0], combos.shape[0]
    observed = _observed(statistic, values, n_x)
    chunks, valid = _chunked(combos, _CHUNK)

    def step(counts, chunk):
        idx, ok = chunk
        masks = jnp.any(idx[:, :, None].astype(jnp.int32) == jnp.arange(n), axis=1)
        return counts + _exceedances(statistic, values, masks, ok, observed, ties), None

    counts, _ = jax.lax.scan(step, jnp.zeros(2, jnp.int32), (chunks, valid))
    p = jnp.where(jnp.isnan(observed), jnp.nan, _p_value(counts, total, alternative))
    return PermutationResult(observed, p.astype(jnp.float32), jnp.asarray(True), jnp.asarray(total, jnp.int32))


@by_work("statistic", "n_x", "n_permutations", "alternative", "ties")
def _monte_carlo_test(key, values, *, statistic, n_x, n_permutations, alternative, ties) -> PermutationResult:
    """Draw n_permutations partitions, partition i from ``jax.random.fold_in(key, i)``, _CHUNK at a time
    (no array of all keys: memory does not grow with n_permutations)."""
    n = values.shape[0]
    observed = _observed(statistic, values, n_x)

    def step(counts, first):
        index = first + jnp.arange(_CHUNK, dtype=jnp.uint32)
        masks = jax.vmap(lambda i: _random_partition(jax.random.fold_in(key, i), n, n_x))(index)
        return counts + _exceedances(statistic, values, masks, index < n_permutations, observed, ties), None

    starts = jnp.arange(0, n_permutations, _CHUNK, dtype=jnp.uint32)
    counts, _ = jax.lax.scan(step, jnp.zeros(2, jnp.int32), starts)
    added = int(ties == "inclusive")  # the observed arrangement joins the draws: (k + 1) / (n + 1)
    p = _p_value(counts + added, n_permutations + added, alternative)
    p = jnp.where(jnp.isnan(observed), jnp.nan, p)
    return PermutationResult(
        observed, p.astype(jnp.float32), jnp.asarray(False), jnp.asarray(n_permutations, jnp.int32)
    )


def _check_config(n: int, n_x, options: StatsOptions) -> None:
    if not isinstance(options, StatsOptions):
        raise ConfigError(
            f"permutation_test: options must be a jaxassoc.stats.StatsOptions (e.g. StatsOptions(n_permutations="
            f"10_000)); got {type(options).__name__}."
        )
    exact_bound, n_permutations = options.exact_bound, options.n_permutations
    alternative, ties = options.alternative, options.ties
    for name, value in (("n_x", n_x), ("exact_bound", exact_bound), ("n_permutations", n_permutations)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConfigError(f"permutation_test: {name} must be an integer; got {value!r}.")
    if alternative not in ALTERNATIVES:
        raise ConfigError(f"permutation_test: alternative={alternative!r} is not supported: use one of {ALTERNATIVES}.")
    if ties not in TIES:
        raise ConfigError(
            f"permutation_test: ties={ties!r} is not supported: use 'inclusive' (>=, the observed arrangement "
            f"counts) or 'strict' (>, Eq. 4 as printed)."
        )
    if not 0 <= exact_bound <= MAX_PARTITIONS:
        raise ConfigError(f"permutation_test: exact_bound must lie in 0..{MAX_PARTITIONS:,}; got {exact_bound}.")
    if not 1 <= n_permutations <= MAX_PARTITIONS:
        raise ConfigError(
            f"permutation_test: n_permutations must lie in 1..{MAX_PARTITIONS:,} (p resolution 1e-7); "
            f"got {n_permutations}."
        )
    if n_x < 1 or n - n_x < 1:
        raise InputError(
            f"permutation_test: both groups need at least one item; got n_x={n_x} of n={n} values "
            f"(group X = values[:n_x], group Y = values[n_x:])."
        )


def _finite_float32(values: Float[Array, "*T n"]) -> Float[Array, "*T n"]:
    """``values`` as float32; InputError naming the items (1-D) or tests (2-D) with NaN or infinite ones (a
    float64 beyond float32's range included): an infinite score ties every partition that holds it with
    the observed one, so p would read 0 or 1 silently."""
    with np.errstate(over="ignore"):
        values = jnp.asarray(values, jnp.float32)
    if isinstance(values, jax.core.Tracer):
        return values
    host = np.asarray(values)
    for what, bad in (("NaN", np.isnan(host)), ("infinite values (or beyond float32's ±3.4e38)", np.isinf(host))):
        if bad.any():
            rows = np.unique(np.nonzero(bad)[0]).tolist()
            where = f"at positions {rows}" if host.ndim == 1 else f"in tests (rows) {rows}"
            raise InputError(f"permutation_test: values contain {what} {where}; score every item or drop it first.")
    return values


def _run(key, values, n_x, statistic, options: StatsOptions) -> PermutationResult:
    """Pick exact or Monte Carlo; a 2-D ``values`` is a batch of tests sharing the partitions."""
    n, n_permutations = values.shape[-1], options.n_permutations
    statics = dict(statistic=statistic, n_x=int(n_x), alternative=options.alternative, ties=options.ties)
    if math.comb(n, n_x) <= options.exact_bound:
        combos = jnp.asarray(_combinations(n, int(n_x)))
        test = lambda _, v: _exact_test(combos, v, work=combos.shape[0] * n, **statics)  # noqa: E731
    else:
        test = partial(_monte_carlo_test, n_permutations=int(n_permutations), work=int(n_permutations) * n, **statics)
    if values.ndim == 2:
        return jax.vmap(test, in_axes=(None, 0))(key, values)
    return test(key, values)


def permutation_test(
    key: PRNGKeyArray,
    values: Float[Array, " n"],
    n_x: int,
    *,
    statistic: Callable[[Float[Array, " n"], Bool[Array, " n"]], Float[Array, ""]] = difference_of_sums,
    options: StatsOptions = StatsOptions(),
) -> PermutationResult:
    """One-sided (or two-sided) permutation test that X's items score higher than Y's (docs/methods.md §2).

    ``values[:n_x]`` is group X, ``values[n_x:]`` group Y (sizes may differ; partitions keep them).
    ``statistic(values, in_x_mask)`` maps the scores and a mask of group X to a scalar; the default is
    WEAT's S = Σ_X − Σ_Y. Pass a module-level function: it is a static argument of ``jit``, so a new
    lambda or closure compiles anew on every call. ``options`` (:class:`~jaxassoc.stats.StatsOptions`) gives
    ``exact_bound``, ``n_permutations``, ``alternative`` and ``ties``; its other fields are unused here.

    Exact when C(n, n_x) <= ``exact_bound``: every partition is enumerated (the index sets are built on
    the host once per (n, n_x) and cached) and ``key`` is unused. Otherwise Monte Carlo: partition i is
    drawn uniformly from ``jax.random.fold_in(key, i)`` (the same key as ``jax.random.split(key,
    n_permutations)[i]`` with JAX's default partitionable threefry), independently (with replacement
    among partitions).

    p-values under ``ties="inclusive"`` (default): "greater" #{S_i >= S} / N exact, (#{S_i >= S} + 1) /
    (n_permutations + 1) Monte Carlo (the observed arrangement added to the draws); "less" the same with
    <=; "two-sided" min(1, 2 min(p_greater, p_less)) (scipy's rule). So p is at least 1/N exact and
    1/(n_permutations + 1) Monte Carlo (:func:`smallest_p`), and a valid p-value. ``ties="strict"`` is Eq. 4
    as printed: #{S_i > S} / N (Monte Carlo: / n_permutations, no +1), which can read 0 and is smaller by
    at most 1/N (exact, no ties) or about 1/n_permutations. Equality is judged with the tolerance
    100 eps |S| (see the module docstring).

    Runs under ``jit``/``vmap``; ``permutation_test_batch`` evaluates many tests in one call.
    """
    if np.ndim(values) != 1:
        raise InputError(f"permutation_test: values must be 1-D (one score per item); got shape {np.shape(values)}.")
    _check_config(np.shape(values)[0], n_x, options)
    key = check_key("permutation_test", key)
    values = _finite_float32(values)
    return _run(key, values, n_x, statistic, options)


def permutation_test_batch(
    key: PRNGKeyArray,
    values: Float[Array, "T n"],
    n_x: int,
    *,
    statistic: Callable[[Float[Array, " n"], Bool[Array, " n"]], Float[Array, ""]] = difference_of_sums,
    options: StatsOptions = StatsOptions(),
) -> PermutationResult:
    """``permutation_test`` for T tests of equal shape in one jitted call; every field gets a leading T axis.

    All tests share the same drawn partitions (common random numbers), so row t of the result equals
    ``permutation_test(key, values[t], n_x, ...)`` and the partitions are drawn once for the whole batch.
    For independent draws per test, ``jax.vmap`` ``permutation_test`` over split keys instead.
    """
    if np.ndim(values) != 2 or np.shape(values)[0] < 1:
        raise InputError(
            f"permutation_test_batch: values must be 2-D (tests x items) with at least one test; got shape {np.shape(values)}."
        )
    _check_config(np.shape(values)[1], n_x, options)
    key = check_key("permutation_test_batch", key)
    values = _finite_float32(values)
    return _run(key, values, n_x, statistic, options)


def smallest_p(n: int, n_x: int, *, options: StatsOptions = StatsOptions()) -> float:
    """The smallest p-value :func:`permutation_test` can report with ``options`` for n items, n_x in group X
    (:meth:`StatsOptions.smallest_p`): 1/C(n, n_x) exact, 1/(n_permutations + 1) Monte Carlo, doubled for
    "two-sided"; Eq. 4's strict count (``ties="strict"``) can read below it, down to 0."""
    return options.smallest_p(n, n_x)
