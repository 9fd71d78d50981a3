"""CEAT, the Contextualized Embedding Association Test (Guo & Caliskan 2021, §4; Cao et al. 2022, §3.1;
docs/methods.md §3).

Each word of the target sets X, Y and attribute sets A, B has many contextual embeddings (one per
sentence it occurs in). A draw picks one of them per word at random and computes the WEAT effect size
es_i (Caliskan et al. 2017, Eq. 3, std with ddof 1) and its variance v_i = std² of s(w, A, B) over X ∪ Y.
The N draws (default 10,000) are combined by a random-effects meta-analysis (DerSimonian & Laird 1986):

    w_i = 1/v_i,  Q = Σ w_i (es_i − ē_w)²,  df = N − 1,  c = Σ w_i − Σ w_i² / Σ w_i,
    τ² = max(0, (Q − df) / c),  w*_i = 1/(v_i + τ²),
    CES = Σ w*_i es_i / Σ w*_i,  V(CES) = 1 / Σ w*_i,  p = Φ̄(CES / √V)   (one-sided, "greater").

``alternative="less"`` gives Φ(CES / √V), ``"two-sided"`` 2 Φ̄(|CES| / √V). A draw whose s is constant
(up to float rounding, e.g. A and B hold the same vectors) has an undefined effect size: CES, its
variance and p are then NaN.

Cao et al.'s single-group variant (one group set G against A and B) replaces the WEAT by its single-
category form: es = mean_g [mean_a cos(g, a) − mean_b cos(g, b)] / std_{g, w ∈ A ∪ B} cos(g, w), with
v = that std². The paper's formula did not survive in our copy of the text; this is our reading of
"the effect size of the distance difference between g with A and B" (SC-WEAT for a single group word).

Ragged inputs: each set is a :class:`ContextualSet` — vectors padded to (words, max_contexts, D) and the
number of real contexts per word. :func:`draw_indices` and the statistics are separate so a reference
implementation can be fed the same draws.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfc
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.metrics.weat import is_constant, unit_rows
from jaxassoc.stats.keys import check_key
from jaxassoc.stats.options import ALTERNATIVES, DEFAULT_ALTERNATIVE

N_DRAWS = 10_000


class ContextualSet(NamedTuple):
    """A word set's contextual embeddings, padded: ``vectors[w, c]`` is word w in context c < counts[w]."""

    vectors: Float[Array, "words contexts D"]
    counts: Int[Array, " words"]


class RandomEffects(NamedTuple):
    """A DerSimonian–Laird random-effects combination of per-draw effect sizes."""

    ces: Float[Array, ""]  # combined effect size
    variance: Float[Array, ""]  # V(CES) = 1 / Σ w*
    tau_squared: Float[Array, ""]  # between-draw variance τ²
    p_value: Float[Array, ""]  # Φ̄(CES / √V) (greater), Φ(CES / √V) (less) or 2 Φ̄(|CES| / √V) (two-sided)


class CeatResult(NamedTuple):
    """CEAT: the combination and the per-draw effect sizes and variances."""

    combined: RandomEffects
    effect_sizes: Float[Array, " N"]
    variances: Float[Array, " N"]


@functools.partial(jax.jit, static_argnames=("alternative",))
def random_effects(
    effect_sizes: Float[Array, " N"], variances: Float[Array, " N"], *, alternative: str = DEFAULT_ALTERNATIVE
) -> RandomEffects:
    """DerSimonian–Laird τ², combined effect size, its variance and the p-value of ``alternative``."""
    if alternative not in ALTERNATIVES:
        raise ConfigError(f"CEAT: alternative={alternative!r} is not supported: use one of {ALTERNATIVES}")
    w = 1.0 / variances
    sw = jnp.sum(w)
    fixed = jnp.sum(w * effect_sizes) / sw
    q = jnp.sum(w * (effect_sizes - fixed) ** 2)
    df = effect_sizes.shape[0] - 1
    c = sw - jnp.sum(w * w) / sw
    tau2 = jnp.maximum(0.0, (q - df) / c)
    w_star = 1.0 / (variances + tau2)
    ces = jnp.sum(w_star * effect_sizes) / jnp.sum(w_star)
    var = 1.0 / jnp.sum(w_star)
    z = ces / jnp.sqrt(var) / jnp.sqrt(2.0)
    p = {"greater": 0.5 * erfc(z), "less": 0.5 * erfc(-z), "two-sided": erfc(jnp.abs(z))}[alternative]
    return RandomEffects(ces=ces, variance=var, tau_squared=tau2, p_value=p)


def weat_draw(
    x: Float[Array, "nx D"], y: Float[Array, "ny D"], a: Float[Array, "na D"], b: Float[Array, "nb D"]
) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """One draw's WEAT effect size and variance (std² of s(w, A, B) over X ∪ Y, ddof 1); the effect size is
    NaN when s is constant up to float rounding (:func:`jaxassoc.metrics.weat.is_constant`)."""
    t = unit_rows(jnp.concatenate([x, y]))
    mean_a, mean_b = (t @ unit_rows(a).T).mean(axis=1), (t @ unit_rows(b).T).mean(axis=1)
    s = mean_a - mean_b
    std = jnp.std(s, ddof=1)
    nx = x.shape[0]
    constant = is_constant(s, jnp.maximum(jnp.abs(mean_a), jnp.abs(mean_b)).max())
    return jnp.where(constant, jnp.nan, (s[:nx].mean() - s[nx:].mean()) / std), std**2


def single_group_draw(
    g: Float[Array, "ng D"], a: Float[Array, "na D"], b: Float[Array, "nb D"]
) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """One draw of Cao et al.'s single-group variant (see the module docstring)."""
    cos_a, cos_b = unit_rows(g) @ unit_rows(a).T, unit_rows(g) @ unit_rows(b).T
    std = jnp.std(jnp.concatenate([cos_a, cos_b], axis=1), ddof=1)
    return (cos_a.mean(axis=1) - cos_b.mean(axis=1)).mean() / std, std**2


def draw_indices(key: PRNGKeyArray, counts: Int[Array, " words"], n_draws: int) -> Int[Array, "N words"]:
    """For each draw, one context index per word, uniform over that word's contexts."""
    return jax.random.randint(check_key("draw_indices", key), (n_draws, counts.shape[0]), 0, counts[None, :])


def _pick(s: ContextualSet, idx: Int[Array, " words"]) -> Float[Array, "words D"]:
    return jnp.take_along_axis(s.vectors, idx[:, None, None], axis=1)[:, 0]


@functools.partial(jax.jit, static_argnames=("chunk",))
def weat_draws(
    sets: tuple[ContextualSet, ContextualSet, ContextualSet, ContextualSet],
    indices: tuple[Int[Array, "N nx"], Int[Array, "N ny"], Int[Array, "N na"], Int[Array, "N nb"]],
    chunk: int = 1000,
) -> tuple[Float[Array, " N"], Float[Array, " N"]]:
    """Effect sizes and variances of the draws given by ``indices`` (``chunk`` draws at a time)."""

    def one(idx):
        return weat_draw(*(_pick(s, i) for s, i in zip(sets, idx)))

    return jax.lax.map(one, indices, batch_size=chunk)


@functools.partial(jax.jit, static_argnames=("chunk",))
def single_group_draws(
    sets: tuple[ContextualSet, ContextualSet, ContextualSet],
    indices: tuple[Int[Array, "N ng"], Int[Array, "N na"], Int[Array, "N nb"]],
    chunk: int = 1000,
) -> tuple[Float[Array, " N"], Float[Array, " N"]]:
    """Effect sizes and variances of single-group draws given by ``indices``."""

    def one(idx):
        return single_group_draw(*(_pick(s, i) for s, i in zip(sets, idx)))

    return jax.lax.map(one, indices, batch_size=chunk)


def check_contextual_set(name: str, s: ContextualSet, *, min_words: int = 1, dim: int | None = None) -> ContextualSet:
    """Host-side gate: shapes, at least one context per word, finite non-zero vectors in use."""
    vectors, counts = np.asarray(s.vectors), np.asarray(s.counts)
    if vectors.ndim != 3 or counts.shape != vectors.shape[:1]:
        raise InputError(
            f"CEAT set {name!r}: vectors must be (words, contexts, dim) with one count per word; got "
            f"{vectors.shape} and counts {counts.shape}"
        )
    if vectors.shape[0] < min_words:
        raise InputError(f"CEAT set {name!r} has {vectors.shape[0]} words; it needs at least {min_words}")
    if dim is not None and vectors.shape[2] != dim:
        raise InputError(f"CEAT set {name!r} has {vectors.shape[2]}-d vectors, the other sets {dim}-d")
    bad = np.flatnonzero((counts < 1) | (counts > vectors.shape[1]))
    if bad.size:
        raise InputError(
            f"CEAT set {name!r}: words {bad.tolist()} have context counts {counts[bad].tolist()} outside "
            f"1..{vectors.shape[1]}; drop words that never occur in the corpus"
        )
    used = np.arange(vectors.shape[1])[None, :] < counts[:, None]
    with np.errstate(over="ignore"):  # a float64 beyond float32's range becomes inf, refused below
        vectors = vectors.astype(jax.dtypes.canonicalize_dtype(np.result_type(vectors.dtype, np.float32)))
    finite = np.isfinite(vectors).all(axis=-1)
    nonzero = np.abs(np.where(finite[..., None], vectors, 0)).max(axis=-1) >= np.finfo(vectors.dtype).tiny
    broken = np.flatnonzero((used & ~(finite & nonzero)).any(axis=1))
    if broken.size:
        raise InputError(f"CEAT set {name!r}: words {broken.tolist()} have NaN, infinite or zero vectors")
    return ContextualSet(jnp.asarray(vectors), jnp.asarray(counts))


def ceat(
    key: PRNGKeyArray,
    x: ContextualSet,
    y: ContextualSet,
    a: ContextualSet,
    b: ContextualSet,
    *,
    n_draws: int = N_DRAWS,
    chunk: int = 1000,
    alternative: str = DEFAULT_ALTERNATIVE,
) -> CeatResult:
    """CEAT (Guo & Caliskan 2021): ``n_draws`` random draws, random-effects combination, p of ``alternative``."""
    x = check_contextual_set("X", x)
    dim = x.vectors.shape[2]
    y, a, b = (check_contextual_set(n, s, dim=dim) for n, s in (("Y", y), ("A", a), ("B", b)))
    if x.counts.shape[0] + y.counts.shape[0] < 3:
        raise InputError("CEAT: X ∪ Y needs at least 3 words for a variance of the effect size (ddof 1)")
    if n_draws < 2:
        raise InputError(f"CEAT: the random-effects model needs at least 2 draws; got n_draws={n_draws}")
    keys = jax.random.split(check_key("ceat", key), 4)
    idx = tuple(draw_indices(k, s.counts, n_draws) for k, s in zip(keys, (x, y, a, b)))
    es, v = weat_draws((x, y, a, b), idx, chunk=chunk)
    return CeatResult(combined=random_effects(es, v, alternative=alternative), effect_sizes=es, variances=v)


def ceat_single_group(
    key: PRNGKeyArray,
    group: ContextualSet,
    a: ContextualSet,
    b: ContextualSet,
    *,
    n_draws: int = N_DRAWS,
    chunk: int = 1000,
    alternative: str = DEFAULT_ALTERNATIVE,
) -> CeatResult:
    """Cao et al.'s per-group CEAT: group set G against attributes A and B (p of ``alternative``)."""
    group = check_contextual_set("group", group)
    dim = group.vectors.shape[2]
    a, b = (check_contextual_set(n, s, dim=dim) for n, s in (("A", a), ("B", b)))
    if n_draws < 2:
        raise InputError(f"CEAT: the random-effects model needs at least 2 draws; got n_draws={n_draws}")
    keys = jax.random.split(check_key("ceat_single_group", key), 3)
    idx = tuple(draw_indices(k, s.counts, n_draws) for k, s in zip(keys, (group, a, b)))
    es, v = single_group_draws((group, a, b), idx, chunk=chunk)
    return CeatResult(combined=random_effects(es, v, alternative=alternative), effect_sizes=es, variances=v)


def pad_contexts(per_word: list[ArrayLike]) -> ContextualSet:
    """Ragged per-word context matrices (contexts_w, D) → a padded :class:`ContextualSet`."""
    if not per_word:
        raise InputError("CEAT: empty word set")
    arrays = [np.asarray(v, np.float32) for v in per_word]
    dims = {a.shape[1] if a.ndim == 2 else None for a in arrays}
    if len(dims) != 1 or None in dims:
        raise InputError(
            f"CEAT: every word needs a (contexts, dim) matrix of the same dim; got shapes {[a.shape for a in arrays]}"
        )
    longest = max(a.shape[0] for a in arrays)
    out = np.zeros((len(arrays), max(longest, 1), dims.pop()), np.float32)
    for i, a in enumerate(arrays):
        out[i, : a.shape[0]] = a
    return ContextualSet(jnp.asarray(out), jnp.asarray([a.shape[0] for a in arrays], jnp.int32))
