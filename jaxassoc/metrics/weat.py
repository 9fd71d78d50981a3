"""WEAT and SC-WEAT (Caliskan, Bryson & Narayanan 2017; ZCA-WEAT paper, Eq. 1-4).

The kernels (:func:`associations`, :func:`weat_statistics`, :func:`weat_effect_size`,
:func:`sc_weat_effect_size`) are pure, jit-compiled and differentiable in the vectors; they vmap over
tests of equal shape. :func:`sc_weat` adds SC-WEAT's permutation p-value (attributes permuted). They assume valid inputs: :func:`check_word_set` is the host-side gate that turns
empty, single-word, non-numeric, NaN, zero or mismatched sets into :class:`~jaxassoc.errors.InputError`,
and :func:`weat` runs it before the kernels, the permutation test and the bootstrap.

One word rule for every metric that takes word sets (WEAT, RPAM Test, CEAT): a word appears at most
once in a test, so a repeat inside a set (it would count twice) and a word in two sets (X and Y, A and
B, or a target that is also an attribute) are refused by :func:`check_distinct_words`; without words,
:func:`weat` applies it to the vectors (identical rows).

Undefined statistics: when every target has the same association s (e.g. A and B hold the same
vectors), d = 0/0 and every partition ties with the observed one, so d, p and the CI are NaN and
``defined`` is False (:data:`UNDEFINED_CONSTANT_S` says why), never p = 0. "The same" allows for float
rounding: s is a difference of two means (of cosines, of probabilities) that may be computed in another
order, so identical A and B give s of about 1e-9, not 0; s counts as constant when its standard
deviation is at most 16 eps times the magnitude of those means (:func:`is_constant`). Rounding gives at
most about 2 eps (identical A and B, shuffled and rescaled, 8-768 dimensions); real differences are
thousands of eps, even on a tiny random language model whose s is about 1e-7.

|X| != |Y| is allowed: S and d are defined for unequal sets, and the permutation test re-partitions
X ∪ Y into sets of the original sizes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PRNGKeyArray

from jaxassoc import stats
from jaxassoc.data.word_sets import check_distinct_words
from jaxassoc.errors import InputError
from jaxassoc.stats import StatsOptions
from jaxassoc.stats.keys import check_key


class WeatStatistics(NamedTuple):
    """Eq. 1-3: per-target associations s(w, A, B) (X first, then Y), S and d."""

    associations: Float[Array, " n"]
    S: Float[Array, ""]
    d: Float[Array, ""]


UNDEFINED_CONSTANT_S = (
    "the association s is the same for every target of X ∪ Y up to float rounding (e.g. A and B hold the same "
    "vectors): d, p and CI are undefined"
)
_CONSTANT_EPS = 16  # s is constant when its std is at most this many eps of the magnitude of its terms


class WeatResult(NamedTuple):
    """A WEAT with its permutation p-value and a bootstrap CI of d over stimuli."""

    d: Float[Array, ""]
    S: Float[Array, ""]
    p_value: Float[Array, ""]
    exact: Bool[Array, ""]  # True: all partitions enumerated; False: Monte Carlo
    n_resamples: Int[Array, ""]  # partitions enumerated or permutations drawn
    ci_low: Float[Array, ""]
    ci_high: Float[Array, ""]
    defined: Bool[Array, ""]  # False: s is constant; d, p and CI are NaN (UNDEFINED_CONSTANT_S)


def _rescale(x: ArrayLike, by: ArrayLike, axis: int | None = None) -> Array:
    """``x`` times the power of two that brings max |``by``| (along ``axis``) into [0.5, 1).

    Exact (no rounding, no gradient through the factor), so a scale-invariant result (a cosine, d) is
    unchanged, bit for bit, while its squares can no longer overflow (values beyond ~1e19) or underflow
    (below ~1e-19) float32.
    """
    x = jnp.asarray(x)
    _, e = jnp.frexp(jax.lax.stop_gradient(jnp.max(jnp.abs(by), axis=axis, keepdims=axis is not None)))
    half = e // 2  # two factors: 2^-e alone leaves float32's range when max |by| is beyond 2^±126
    one = jnp.ones((), x.dtype)
    return x * jnp.ldexp(one, -half) * jnp.ldexp(one, half - e)


def unit_rows(x: Float[ArrayLike, "*n D"]) -> Float[Array, "*n D"]:
    """Each row of ``x`` divided by its norm, for any finite magnitude of its entries (:func:`_rescale`)."""
    x = jnp.asarray(x, jnp.result_type(x, 1.0))
    x = _rescale(x, x, axis=-1)
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def cosine_similarities(u: Float[Array, "n D"], v: Float[Array, "m D"]) -> Float[Array, "n m"]:
    """Eq. 5 for every pair of rows."""
    return unit_rows(u) @ unit_rows(v).T


@jax.jit
def associations(w: Float[Array, "n D"], a: Float[Array, "na D"], b: Float[Array, "nb D"]) -> Float[Array, " n"]:
    """Eq. 1: s(w, A, B) = mean_a cos(w, a) - mean_b cos(w, b), for each row w."""
    return cosine_similarities(w, a).mean(axis=1) - cosine_similarities(w, b).mean(axis=1)


@jax.jit
def association_scale(w: Float[Array, "n D"], a: Float[Array, "na D"], b: Float[Array, "nb D"]) -> Float[Array, ""]:
    """The magnitude of the two means s(w, A, B) is the difference of: max over w of |mean_a cos|, |mean_b cos|."""
    return jnp.maximum(
        jnp.abs(cosine_similarities(w, a).mean(axis=1)), jnp.abs(cosine_similarities(w, b).mean(axis=1))
    ).max()


@jax.jit
def is_constant(s: Float[Array, " n"], scale: Float[ArrayLike, ""] | None = None) -> Bool[Array, ""]:
    """True when the per-target scores s do not vary beyond float rounding: std(s) <= 16 eps x ``scale``,
    the magnitude of the terms s is a difference of (default: max |s|, i.e. only an exactly constant s)."""
    s = jnp.asarray(s)
    scale = jnp.max(jnp.abs(s)) if scale is None else scale
    return jnp.std(_rescale(s, s)) <= _CONSTANT_EPS * jnp.finfo(s.dtype).eps * _rescale(scale, s)


def effect_size(
    s_x: Float[Array, " nx"], s_y: Float[Array, " ny"], *, ddof: int = StatsOptions.ddof
) -> Float[Array, ""]:
    """Eq. 3: (mean_X s - mean_Y s) / std_{X ∪ Y} s; ddof 1 = Caliskan et al., 0 = WEFE. Any finite
    magnitude of s (:func:`_rescale`)."""
    s = jnp.concatenate([s_x, s_y])
    s, n_x = _rescale(s, s), s_x.shape[0]
    return (s[:n_x].mean() - s[n_x:].mean()) / jnp.std(s, ddof=ddof)


@functools.partial(jax.jit, static_argnames=("ddof",))
def weat_statistics(
    x: Float[Array, "nx D"],
    y: Float[Array, "ny D"],
    a: Float[Array, "na D"],
    b: Float[Array, "nb D"],
    *,
    ddof: int = StatsOptions.ddof,
) -> WeatStatistics:
    """Eq. 1-3 for target sets X, Y and attribute sets A, B."""
    s_x, s_y = associations(x, a, b), associations(y, a, b)
    return WeatStatistics(
        associations=jnp.concatenate([s_x, s_y]),
        S=s_x.sum() - s_y.sum(),
        d=effect_size(s_x, s_y, ddof=ddof),
    )


@functools.partial(jax.jit, static_argnames=("ddof",))
def weat_effect_size(
    x: Float[Array, "nx D"],
    y: Float[Array, "ny D"],
    a: Float[Array, "na D"],
    b: Float[Array, "nb D"],
    *,
    ddof: int = StatsOptions.ddof,
) -> Float[Array, ""]:
    """Eq. 3 alone: a scalar to take ``jax.grad`` of."""
    return weat_statistics(x, y, a, b, ddof=ddof).d


@functools.partial(jax.jit, static_argnames=("ddof",))
def sc_weat_effect_size(
    w: Float[Array, "n D"], a: Float[Array, "na D"], b: Float[Array, "nb D"], *, ddof: int = StatsOptions.ddof
) -> Float[Array, " n"]:
    """SC-WEAT (Caliskan et al. 2017, suppl.): (mean_A cos(w,a) - mean_B cos(w,b)) / std_{A∪B} cos(w,·).

    One effect size per row of ``w``.
    """
    cos_a, cos_b = cosine_similarities(w, a), cosine_similarities(w, b)
    spread = jnp.std(jnp.concatenate([cos_a, cos_b], axis=1), axis=1, ddof=ddof)
    return (cos_a.mean(axis=1) - cos_b.mean(axis=1)) / spread


class ScWeatResult(NamedTuple):
    """SC-WEAT per target word: d(w), the permutation p over re-partitions of A ∪ B, and how p was got."""

    d: Float[Array, " n"]
    p_value: Float[Array, " n"]
    exact: Bool[Array, ""]  # True: all partitions of A ∪ B enumerated; False: Monte Carlo
    n_resamples: Int[Array, ""]
    defined: Bool[Array, " n"]  # False: cos(w, ·) is the same for every attribute; d and p are NaN


def sc_weat(
    key: PRNGKeyArray,
    w: ArrayLike,
    a: ArrayLike,
    b: ArrayLike,
    *,
    words: tuple[Sequence[str], Sequence[str], Sequence[str]] | None = None,
    names: tuple[str, str, str] = ("W", "A", "B"),
    options: StatsOptions = StatsOptions(),
) -> ScWeatResult:
    """SC-WEAT of every row of ``w`` (Caliskan et al. 2017, suppl.): :func:`sc_weat_effect_size` and its
    permutation p-value.

    As in the paper the attributes are permuted: p ("greater") is the share of re-partitions (A_i, B_i) of
    A ∪ B into sets of sizes |A|, |B| with mean_{A_i} cos(w, ·) − mean_{B_i} cos(w, ·) beyond the observed
    one (:func:`jaxassoc.stats.permutation_test` with ``difference_of_means``: exact enumeration up to
    ``options.exact_bound`` partitions, else ``options.n_permutations`` drawn with ``key``; ``ties`` and
    ``alternative`` as in :func:`weat`; ``ddof`` is d's). ``options.n_bootstrap`` and ``confidence`` are
    unused: SC-WEAT has no CI. Every word sees the same partitions. The sets pass :func:`check_word_set` and
    :func:`check_distinct_words` (``words``/``names`` label the errors).
    """
    ddof = _check_ddof(options.ddof)
    key = check_key("sc_weat", key)
    w = check_word_set(names[0], w, words[0] if words is not None else None)
    a, b = (
        check_word_set(n, v, ws, dim=w.shape[1])
        for n, v, ws in zip(names[1:], (a, b), words[1:] if words is not None else (None, None))
    )
    if words is not None:
        check_distinct_words("SC-WEAT", words, names)
    else:
        _check_distinct_rows((w, a, b), names)
    cosines = cosine_similarities(w, jnp.concatenate([jnp.asarray(a), jnp.asarray(b)]))
    perm = stats.permutation_test_batch(
        key,
        cosines,
        a.shape[0],
        statistic=stats.difference_of_means,
        options=options,
    )
    defined = ~jax.vmap(is_constant)(cosines)
    d = sc_weat_effect_size(w, a, b, ddof=ddof)
    return ScWeatResult(
        d=jnp.where(defined, d, jnp.nan),
        p_value=jnp.where(defined, perm.p_value, jnp.nan),
        exact=perm.exact[0],
        n_resamples=perm.n_resamples[0],
        defined=defined,
    )


DDOFS = (1, 0)
"""d's standard deviation: 1 sample (Caliskan et al.), 0 population (WEFE); as the CLI's ``stats.ddof``."""


def _check_ddof(ddof) -> int:
    """InputError for a ``ddof`` other than 0 or 1 (a larger one makes d NaN on small sets, silently)."""
    if isinstance(ddof, bool) or ddof not in DDOFS:
        raise InputError(
            f"ddof={ddof!r} is not supported: use 1 (sample std, Caliskan et al.) or 0 (population std, WEFE)"
        )
    return int(ddof)


def check_word_set(
    name: str, vectors: ArrayLike, words: Sequence[str] | None = None, *, dim: int | None = None
) -> np.ndarray:
    """Host-side gate before any kernel: returns the vectors as a float array (the dtype JAX computes in,
    float32 by default) or raises InputError.

    Refuses a set that is not a 2-D numeric array (e.g. the words instead of their vectors), has fewer
    than two vectors (d needs a spread), has NaN or infinite entries (also a float64 beyond float32's
    range) or zero vectors (their cosine is undefined; the message names the words), or whose dimension
    differs from ``dim``. Any other magnitude is fine: the cosine is scale-invariant (:func:`unit_rows`).
    """
    try:
        arr = np.asarray(vectors)
    except ValueError:  # ragged rows
        raise InputError(f"word set {name!r}: rows of different lengths; give a (words, dim) matrix") from None
    if arr.dtype.kind not in "fiu":
        raise InputError(
            f"word set {name!r}: expected numeric vectors, got an array of {arr.dtype} (words instead of their "
            f"vectors?); look the words up first, e.g. with StaticEmbeddings.lookup"
        )

    def label(idx):
        return [words[i] if words is not None else f"row {i}" for i in idx]

    if arr.ndim != 2:
        raise InputError(f"word set {name!r}: expected a (words, dim) matrix, got shape {arr.shape}")
    if arr.shape[0] < 2:
        raise InputError(
            f"word set {name!r} has {arr.shape[0]} word(s) with vectors; a WEAT needs at least two per "
            f"set (check the list and how many words were lost to the vocabulary)"
        )
    if words is not None and len(words) != arr.shape[0]:
        raise InputError(f"word set {name!r}: {len(words)} words but {arr.shape[0]} vectors")
    if dim is not None and arr.shape[1] != dim:
        raise InputError(
            f"word set {name!r} has {arr.shape[1]}-d vectors but the other sets have {dim}-d ones; "
            f"take all sets from the same embedding"
        )
    with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf, refused below
        arr = arr.astype(jax.dtypes.canonicalize_dtype(np.result_type(arr.dtype, np.float32)))
    bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
    if bad.size:
        raise InputError(
            f"word set {name!r}: NaN or infinite (beyond ±{np.finfo(arr.dtype).max:.3g}) vectors for {label(bad)}"
        )
    zero = np.flatnonzero(np.abs(arr).max(axis=1) < np.finfo(arr.dtype).tiny)
    if zero.size:
        raise InputError(
            f"word set {name!r}: zero vectors (cosine undefined; entries below {np.finfo(arr.dtype).tiny:.3g} "
            f"count as 0) for {label(zero)}; drop these words"
        )
    return arr


def _check_distinct_rows(sets: Sequence[np.ndarray], names: Sequence[str]) -> None:
    """The word rule on bare vectors: no row appears twice across the four sets."""
    rows = np.concatenate(sets)
    _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():
        where = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
        offsets = np.cumsum([0] + [len(s) for s in sets])
        row = first[np.argmax(counts > 1)]
        same = np.flatnonzero((rows == rows[row]).all(axis=1))
        places = [f"{names[where[i]]!r} row {i - offsets[where[i]]}" for i in same]
        raise InputError(
            f"the same vector is in {' and '.join(places)}; each word may appear once in a test (pass "
            f"words= to name them)"
        )


def clustered_effect_size(
    x: tuple[Float[Array, "wx k"], Float[Array, "wx k"]],
    y: tuple[Float[Array, "wy k"], Float[Array, "wy k"]],
    *,
    ddof: int = StatsOptions.ddof,
) -> Float[Array, ""]:
    """Eq. 3 over items grouped in clusters (SEAT: a word's sentences): ``x = (s, mask)`` with one row per
    cluster of X, its items' association scores padded to ``k`` and ``mask`` 1 on the real ones (likewise
    ``y``). Equal to :func:`effect_size` on the items the masks select, so a bootstrap that resamples the
    rows resamples whole clusters (May et al. 2019's words, not their sentences)."""
    (s_x, m_x), (s_y, m_y) = x, y
    s, m = jnp.concatenate([s_x.ravel(), s_y.ravel()]), jnp.concatenate([m_x.ravel(), m_y.ravel()])
    s = jnp.where(m > 0, s, 0.0)
    s = _rescale(s, s)
    mean_x = jnp.sum(s[: m_x.size] * m[: m_x.size]) / jnp.sum(m[: m_x.size])
    mean_y = jnp.sum(s[m_x.size :] * m[m_x.size :]) / jnp.sum(m[m_x.size :])
    mean = jnp.sum(s * m) / jnp.sum(m)
    var = jnp.sum(m * (s - mean) ** 2) / (jnp.sum(m) - ddof)
    return (mean_x - mean_y) / jnp.sqrt(var)


class ClusteredEffectSize(NamedTuple):
    """:func:`clustered_effect_size` as a hashable callable of the two clustered sets, for the bootstrap."""

    ddof: int

    def __call__(self, x, y) -> Float[Array, ""]:
        return clustered_effect_size(x, y, ddof=self.ddof)


class _EffectSize(NamedTuple):
    """Eq. 3 on (s_X, s_Y) as a hashable callable, so the bootstrap compiles once per ddof."""

    ddof: int

    def __call__(self, s_x: Float[Array, " nx"], s_y: Float[Array, " ny"]) -> Float[Array, ""]:
        return effect_size(s_x, s_y, ddof=self.ddof)


def weat(
    key: PRNGKeyArray,
    x: ArrayLike,
    y: ArrayLike,
    a: ArrayLike,
    b: ArrayLike,
    *,
    words: tuple[Sequence[str], Sequence[str], Sequence[str], Sequence[str]] | None = None,
    names: tuple[str, str, str, str] = ("X", "Y", "A", "B"),
    options: StatsOptions = StatsOptions(),
) -> WeatResult:
    """A full WEAT: d and S (Eq. 1-3), the permutation p-value (Eq. 4) and a bootstrap CI.

    ``options`` (:class:`~jaxassoc.stats.StatsOptions`, e.g. ``StatsOptions(alternative="greater")``) holds
    the settings named below (``alternative``, ``exact_bound``, ...) and d's ``ddof``.
    p is two-sided by default, min(1, 2 min(greater, less)), beside a two-sided CI; ``alternative="greater"``
    is Eq. 4's P[S(Xi, Yi) >= S(X, Y)] (``"less"``: <=), beside a one-sided CI (docs/methods.md §5.8), over re-partitions of X ∪ Y into sets of sizes |X|, |Y|, the observed
    one counted, computed on the per-target associations (S is a difference of their sums): exact
    enumeration when the number of partitions is at most ``exact_bound`` (p >= 1/N), else
    ``n_permutations`` random permutations drawn with ``key`` and p = (k + 1)/(n_permutations + 1);
    ``ties="strict"`` is Eq. 4 as printed (only strictly greater statistics, no +1: it can read 0; see
    :func:`jaxassoc.stats.permutation_test`). The CI of d resamples the targets of X and of Y within their
    own sets (A and B fixed), ``n_bootstrap`` times, and spans ``confidence``. ``names`` and ``words`` (the
    words behind each set's rows) label InputErrors; :func:`check_distinct_words` refuses repeated or
    shared words (without ``words``: repeated vectors). With constant s (:func:`is_constant`), d, p and
    the CI are NaN and ``defined`` is False. On small sets the p cannot go low and the CI means little:
    see :mod:`jaxassoc.stats.small_samples`.
    """
    ddof = _check_ddof(options.ddof)
    key = check_key("weat", key)
    x = check_word_set(names[0], x, words[0] if words is not None else None)
    dim = x.shape[1]
    y, a, b = (
        check_word_set(n, v, w, dim=dim)
        for n, v, w in zip(names[1:], (y, a, b), words[1:] if words is not None else (None,) * 3)
    )
    if words is not None:
        check_distinct_words("WEAT", words, names)
    else:
        _check_distinct_rows((x, y, a, b), names)
    st = weat_statistics(x, y, a, b, ddof=ddof)
    test = association_test(
        key,
        st.associations,
        x.shape[0],
        options=options,
        scale=association_scale(jnp.concatenate([jnp.asarray(x), jnp.asarray(y)]), a, b),
    )
    return WeatResult(d=jnp.where(test.defined, st.d, jnp.nan), S=st.S, **test._asdict())


class AssociationTest(NamedTuple):
    """The WEAT test on per-target association scores: permutation p and bootstrap CI of d."""

    p_value: Float[Array, ""]
    exact: Bool[Array, ""]
    n_resamples: Int[Array, ""]
    ci_low: Float[Array, ""]
    ci_high: Float[Array, ""]
    defined: Bool[Array, ""]  # False: s is constant (is_constant); p and the CI are NaN


@functools.partial(jax.jit, static_argnames=("n_x",))
def _split_at(s: Float[Array, " n"], n_x: int) -> tuple[Float[Array, " nx"], Float[Array, " ny"]]:
    """(s[:n_x], s[n_x:]) as one compiled function (two eager slices would compile one each)."""
    return s[:n_x], s[n_x:]


def association_test(
    key: PRNGKeyArray,
    s: Float[Array, " n"],
    n_x: int,
    *,
    options: StatsOptions = StatsOptions(),
    scale: Float[ArrayLike, ""] | None = None,
) -> AssociationTest:
    """Eq. 4's permutation p of S = Σ_X s − Σ_Y s (``alternative``: greater, less or two-sided) and a
    bootstrap CI of d at ``confidence`` with the same sidedness (one-sided: [lo, inf) or (-inf, hi]; targets
    of X and of Y resampled within their sets), from any
    per-target scores ``s`` (X first): WEAT's cosine associations, RPAM's relative probabilities, ...

    When s is constant (:func:`is_constant`; ``scale``: the magnitude of the means s is a difference of),
    d is 0/0 and every partition ties with the observed one: p and the CI are NaN and ``defined`` is False
    (never p = 0). ``options`` (:class:`~jaxassoc.stats.StatsOptions`) holds every setting, as in :func:`weat`."""
    ddof = _check_ddof(options.ddof)
    key_perm, key_boot = jax.random.split(check_key("association_test", key))
    perm = stats.permutation_test(key_perm, s, n_x, options=options)
    ci = stats.bootstrap_ci_groups(
        key_boot,
        _EffectSize(ddof),
        _split_at(s, n_x),
        n_resamples=options.n_bootstrap,
        confidence=options.confidence,
        alternative=options.alternative,
    )
    defined = ~is_constant(s, scale)
    p, low, high = (jnp.where(defined, v, jnp.nan) for v in (perm.p_value, ci.low, ci.high))
    return AssociationTest(p, perm.exact, perm.n_resamples, low, high, defined)
