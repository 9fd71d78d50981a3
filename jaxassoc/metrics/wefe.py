"""WEFE's metric family (Badilla, Bravo-Marquez & Pérez 2020, IJCAI; docs/methods.md §9): RND, RNSB, MAC,
ECT and RIPA as pure functions of word vectors (static or contextual), one query at a time.

A WEFE query is target sets × attribute sets; each metric has a template (targets, attributes):

- :func:`rnd` (2, 1) — Relative Norm Distance (Garg et al. 2018, PNAS, Eq. 1; WEFE averages over the
  attribute words): mean_a [dist(a, mean X) − dist(a, mean Y)], dist the Euclidean norm (WEFE's default) or
  WEFE's ``"cos"`` option (the cosine *similarity*, as WEFE computes it).
- :func:`rnsb` (n, 2) — Relative Negative Sentiment Bias (Sweeney & Najafian 2019, ACL, §3): a logistic
  regression (:mod:`jaxassoc.metrics.logistic`) learns positive (A) vs negative (B) attribute words; each
  target word's P(negative) is normalised to a distribution over the target words, and RNSB is its KL
  divergence from the uniform one (natural log).
- :func:`mac` (n, n) — Mean Average Cosine (Manzini et al. 2019, NAACL, §4): the mean over target words
  t and attribute sets A_j of S(t, A_j) = mean_{a in A_j} (1 − cos(t, a)), a cosine *distance*.
- :func:`ect` (2, 1) — Embedding Coherence Test (Dev & Phillips 2019, AISTATS, §5): Spearman's ρ between
  cos(mean X, a) and cos(mean Y, a) over the attribute words a; 1 = no bias.
- :func:`ripa` (2, 1) — Relational Inner Product Association (Ethayarajh, Duvenaud & Hirst 2019, ACL,
  Def. 3): per attribute word, the mean over target pairs (x_i, y_i) of a · (x_i − y_i)/||x_i − y_i||.

The kernels assume valid inputs; :func:`check_query` is the host-side gate (empty sets, non-numeric,
NaN, mismatched dimensions, RIPA's unequal pair counts) that raises :class:`~jaxassoc.errors.InputError`
naming the set. ECT is a rank statistic: its gradient is zero almost everywhere (finite, not informative).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from jaxassoc.errors import InputError
from jaxassoc.metrics.logistic import NEWTON_STEPS, fit_logistic, predict_positive
from jaxassoc.metrics.weat import cosine_similarities, unit_rows
from jaxassoc.stats.correlation import spearman

RND_DISTANCES = ("norm", "cos")


class RndResult(NamedTuple):
    """RND and each attribute word's dist(a, mean X) − dist(a, mean Y)."""

    score: Float[Array, ""]
    per_word: Float[Array, " na"]


class RnsbResult(NamedTuple):
    """RNSB (KL divergence from uniform), each target word's P(negative) (mean over iterations) and the
    classifier's accuracy (held-out words with a holdout, else its training words; mean over iterations)."""

    score: Float[Array, ""]
    negative_probabilities: Float[Array, " n"]
    accuracy: Float[Array, ""]


class RipaResult(NamedTuple):
    """RIPA and each attribute word's mean and SD (ddof 0) over the target pairs."""

    score: Float[Array, ""]
    per_word: Float[Array, " na"]
    per_word_sd: Float[Array, " na"]


def check_query(
    sets: Mapping[str, ArrayLike],
    *,
    min_words: Mapping[str, int] | None = None,
    paired: tuple[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """Host-side gate before any kernel: every set a numeric (words, dim) matrix with at least
    ``min_words[name]`` rows (default 1), finite entries and the dimension of the first set; the two sets
    named by ``paired`` (RIPA's target pairs) of equal size. Returns the sets as float arrays; raises
    InputError naming the set otherwise."""
    out, dim = {}, None
    for name, vectors in sets.items():
        try:
            arr = np.asarray(vectors)
        except ValueError:  # ragged rows
            raise InputError(f"word set {name!r}: rows of different lengths; give a (words, dim) matrix") from None
        if arr.dtype.kind not in "fiu":
            raise InputError(f"word set {name!r}: expected numeric vectors, got {arr.dtype} (look the words up first)")
        if arr.ndim != 2:
            raise InputError(f"word set {name!r}: expected a (words, dim) matrix, got shape {arr.shape}")
        need = (min_words or {}).get(name, 1)
        if arr.shape[0] < need:
            raise InputError(
                f"word set {name!r} has {arr.shape[0]} word(s) with vectors; this metric needs at least {need} "
                f"(check the list and how many words were lost to the vocabulary)"
            )
        if dim is not None and arr.shape[1] != dim:
            raise InputError(
                f"word set {name!r} has {arr.shape[1]}-d vectors but the other sets have {dim}-d ones; "
                f"take all sets from the same embedding"
            )
        dim = arr.shape[1]
        arr = arr.astype(np.result_type(arr.dtype, np.float32))
        if not np.isfinite(arr).all():
            raise InputError(
                f"word set {name!r}: NaN or infinite entries in rows {np.flatnonzero(~np.isfinite(arr).all(1)).tolist()}"
            )
        out[name] = arr
    if paired is not None and len(out[paired[0]]) != len(out[paired[1]]):
        raise InputError(
            f"RIPA pairs the target words in order: {paired[0]!r} has {len(out[paired[0]])} and {paired[1]!r} "
            f"{len(out[paired[1]])}; give both sets the same number of words"
        )
    return out


def _distance(a: Float[Array, "na D"], centre: Float[Array, " D"], kind: str) -> Float[Array, " na"]:
    if kind == "norm":
        return jnp.linalg.norm(a - centre[None, :], axis=1)
    return cosine_similarities(a, centre[None, :])[:, 0]


@functools.partial(jax.jit, static_argnames="distance")
def rnd(
    x: Float[Array, "nx D"], y: Float[Array, "ny D"], a: Float[Array, "na D"], *, distance: str = "norm"
) -> RndResult:
    """RND (Garg et al. 2018, Eq. 1, averaged over A as WEFE does): mean_a [dist(a, x̄) − dist(a, ȳ)], x̄ and
    ȳ the target means; ``distance="norm"`` the Euclidean distance, ``"cos"`` WEFE's cosine similarity."""
    if distance not in RND_DISTANCES:
        raise InputError(f"RND distance {distance!r} is unknown; use one of {RND_DISTANCES}")
    per_word = _distance(a, x.mean(axis=0), distance) - _distance(a, y.mean(axis=0), distance)
    return RndResult(per_word.mean(), per_word)


@jax.jit
def mac(targets: Sequence[Float[Array, "nt D"]], attributes: Sequence[Float[Array, "na D"]]) -> Float[Array, ""]:
    """MAC (Manzini et al. 2019, §4; WEFE's (n, n) form): the mean over every target word t of every target
    set and every attribute set A_j of S(t, A_j) = mean_{a in A_j} (1 − cos(t, a))."""
    t = jnp.concatenate(list(targets))
    s = jnp.stack([(1.0 - cosine_similarities(t, a)).mean(axis=1) for a in attributes], axis=1)
    return s.mean()


@jax.jit
def ect(x: Float[Array, "nx D"], y: Float[Array, "ny D"], a: Float[Array, "na D"]) -> Float[Array, ""]:
    """ECT (Dev & Phillips 2019, §5): Spearman's ρ (average ranks for ties) between cos(x̄, a) and cos(ȳ, a)
    over the attribute words a, x̄ and ȳ the target means. NaN when either list is constant."""
    u = cosine_similarities(a, x.mean(axis=0, keepdims=True))[:, 0]
    v = cosine_similarities(a, y.mean(axis=0, keepdims=True))[:, 0]
    return spearman(u, v)


@jax.jit
def ripa(x: Float[Array, "n D"], y: Float[Array, "n D"], a: Float[Array, "na D"]) -> RipaResult:
    """RIPA (Ethayarajh et al. 2019, Def. 3): with the relation vectors b_i = (x_i − y_i)/||x_i − y_i|| of the
    target pairs (x_i, y_i), each attribute word's mean (and SD) of a · b_i over i, and their mean."""
    b = unit_rows(x - y)
    scores = a @ b.T
    per_word = scores.mean(axis=1)
    return RipaResult(per_word.mean(), per_word, scores.std(axis=1))


def holdout_mask(key: PRNGKeyArray, n_positive: int, n_negative: int, test_share: float) -> Float[Array, " n"]:
    """1 for the training words, 0 for the held-out ones: a stratified split of ``ceil(test_share·n)`` words
    (scikit-learn's ``train_test_split(test_size, stratify)`` count), shared out between the classes in
    proportion to their size (largest remainders first) and drawn uniformly within each class. Every class
    keeps at least one training word (InputError otherwise)."""
    n = n_positive + n_negative
    n_test = int(np.ceil(test_share * n))
    quota = np.array([n_positive, n_negative]) * n_test / n
    per_class = np.floor(quota).astype(int)
    for i in np.argsort(-(quota - per_class), kind="stable")[: n_test - per_class.sum()]:
        per_class[i] += 1
    for size, held, role in zip((n_positive, n_negative), per_class, ("positive (A)", "negative (B)")):
        if size - held < 1:
            raise InputError(
                f"RNSB's holdout leaves the {role} attribute set ({size} word(s)) no training word; give it more "
                f"words or turn the holdout off"
            )
    k_pos, k_neg = jax.random.split(key)
    masks = [
        (jax.random.permutation(k, size) >= held).astype(jnp.float32)
        for k, size, held in zip((k_pos, k_neg), (n_positive, n_negative), per_class)
    ]
    return jnp.concatenate(masks)


def _rnsb_once(mask, targets, positive, negative, c, steps):
    x = jnp.concatenate([positive, negative])
    labels = jnp.concatenate([jnp.ones(positive.shape[0]), -jnp.ones(negative.shape[0])]).astype(x.dtype)
    w = fit_logistic(x, labels, mask, c, steps=steps)
    p_negative = 1.0 - predict_positive(w, targets)
    q = p_negative / p_negative.sum()
    kl = jnp.sum(q * jnp.log(q * q.shape[0]))
    correct = (jnp.where(predict_positive(w, x) >= 0.5, 1.0, -1.0) == labels).astype(x.dtype)
    evaluated = jnp.where(jnp.all(mask == 1), 1.0, 1.0 - mask)
    return kl, p_negative, jnp.sum(correct * evaluated) / jnp.sum(evaluated)


@functools.partial(jax.jit, static_argnames=("holdout", "test_share", "iterations", "steps"))
def rnsb(
    key: PRNGKeyArray,
    targets: Float[Array, "n D"],
    positive: Float[Array, "np D"],
    negative: Float[Array, "nn D"],
    *,
    c: float = 1.0,
    holdout: bool = True,
    test_share: float = 0.2,
    iterations: int = 1,
    steps: int = NEWTON_STEPS,
) -> RnsbResult:
    """RNSB (Sweeney & Najafian 2019, §3; WEFE's defaults). A logistic regression (L2, C = ``c``, intercept
    penalised as liblinear) learns ``positive`` (label +1) vs ``negative`` (−1) words, with ``holdout`` on
    the words outside a stratified ``test_share`` split (:func:`holdout_mask`; one iteration splits with
    ``key``, several with ``jax.random.split(key, iterations)``). Each target word's P(negative) is
    normalised, q = p / Σ p, and RNSB = KL(q || uniform) = Σ q log(q·n). With ``iterations`` > 1, the mean
    KL over that many splits (WEFE's ``n_iterations``)."""
    keys = key[None] if iterations == 1 else jax.random.split(key, iterations)
    n_pos, n_neg = positive.shape[0], negative.shape[0]
    if holdout:  # one draw looped over the keys (lax.map): the compiled graph does not grow with ``iterations``
        masks = jax.lax.map(lambda k: holdout_mask(k, n_pos, n_neg, test_share), keys)
    else:
        masks = jnp.ones((iterations, n_pos + n_neg), jnp.float32)
    kl, p, accuracy = jax.vmap(_rnsb_once, in_axes=(0, None, None, None, None, None))(
        masks.astype(targets.dtype), targets, positive, negative, c, steps
    )
    return RnsbResult(kl.mean(), p.mean(axis=0), accuracy.mean())
