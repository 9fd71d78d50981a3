"""Hard Debias (Bolukbasi, Chang, Zou, Saligrama & Kalai 2016, "Man is to Computer Programmer as Woman is
to Homemaker?", NeurIPS) for static word vectors.

1. **Direction.** Every row is scaled to unit length. For each definitional pair (a, b) both members are
   centred on the pair's mean, ``a - (a+b)/2 = (a-b)/2`` and ``b - (a+b)/2 = -(a-b)/2``; the gender
   direction ``g`` is the first principal component of those 2P centred members, i.e. the top right
   singular vector of the P uncentred half-differences ``(a-b)/2`` (the centred members have mean zero,
   so PCA's own centring changes nothing). A PCA of the differences *centred on their mean* would remove
   the shared gender component and return a nearly orthogonal direction; that is not done.
   ``g`` has unit length and points from the second word of the pairs to the first, in sum (debiaswe's
   pairs put the female word first); the sign changes no output.
2. **Neutralise** every word that is not gender-specific: ``w := (w - (w.g) g) / ||w - (w.g) g||``.
3. **Equalise** each pair (a, b), from the unit-length input vectors: ``mu = (a+b)/2``,
   ``nu = mu - (mu.g) g``, ``z = sqrt(1 - ||nu||^2)``, ``a := nu + s z g``, ``b := nu - s z g`` with
   ``s = sign((a-b).g)``: both unit length, symmetric about the direction, equally far from it.
4. Every row is scaled to unit length again.

This follows WEFE's ``HardDebias`` (which equalises from the unit input vectors). debiaswe equalises the
vectors as step 2 left them, which differs only for an equalise word that is not gender-specific: there
both words have zero projection, so which one lands on which side depends on rounding.

Lookup: a definitional or gender-specific word is looked up as given, then in lower case, through the
table's own key rule (``StaticEmbeddings.normalise``: GloVe 6B is lower-cased, so ``Mary`` finds
``mary``). Each equalise pair is tried in lower, title and upper case, as debiaswe and WEFE do, and every
variant whose two words are present is equalised. Words found in no form are returned in
``HardDebiasResult.missing`` per list; a definitional pair with a missing word is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from jaxassoc.data.debiaswe import load_debiaswe_lists
from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.errors import DataError

_TINY = 1e-12


class HardDebiasResult(NamedTuple):
    """The debiased table (unit rows, same words), the direction, and what was done and missed."""

    table: StaticEmbeddings
    direction: Float[np.ndarray, " D"]
    missing: dict[str, tuple[str, ...]]  # "definitional_pairs" / "equalize_pairs" / "gender_specific" -> words
    n_neutralized: int
    equalized: tuple[tuple[str, str], ...]  # the vocabulary's spellings of the equalised pairs


@jax.jit
def normalize_rows(vectors: Float[ArrayLike, "n D"]) -> Float[Array, "n D"]:
    """Each row scaled to unit length; a zero row stays zero."""
    vectors = jnp.asarray(vectors)
    norms = jnp.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / jnp.maximum(norms, _TINY)


@jax.jit
def _direction(vectors: Float[Array, "V D"], pairs: Int[Array, "P 2"]) -> Float[Array, " D"]:
    half_differences = (vectors[pairs[:, 0]] - vectors[pairs[:, 1]]) / 2
    direction = jnp.linalg.svd(half_differences, full_matrices=False)[2][0]
    orientation = jnp.sum(half_differences @ direction)
    return jnp.where(orientation < 0, -direction, direction)


def gender_direction(
    vectors: Float[ArrayLike, "V D"], pairs: Int[ArrayLike, "P 2"], *, normalize: bool = True
) -> Float[Array, " D"]:
    """The first principal component of the pair members, each centred on its pair's mean (module
    docstring, step 1). ``pairs`` holds row indices ``(a, b)``; rows are scaled to unit length first
    unless ``normalize=False``. Unit length, oriented so that the pairs' ``(a - b)`` project positively in sum."""
    pairs = jnp.asarray(pairs, dtype=jnp.int32)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.shape[0] < 1:
        raise DataError(f"gender_direction needs at least one pair of row indices, shape (P, 2); got {pairs.shape}")
    vectors = jnp.asarray(vectors, dtype=jnp.float32)
    return _direction(normalize_rows(vectors) if normalize else vectors, pairs)


@jax.jit
def neutralize(vectors: Float[ArrayLike, "n D"], direction: Float[ArrayLike, " D"]) -> Float[Array, "n D"]:
    """Rows with their component along the unit ``direction`` removed, rescaled to unit length."""
    vectors, direction = jnp.asarray(vectors), jnp.asarray(direction)
    return normalize_rows(vectors - (vectors @ direction)[:, None] * direction)


@jax.jit
def equalize(
    a: Float[ArrayLike, "n D"], b: Float[ArrayLike, "n D"], direction: Float[ArrayLike, " D"]
) -> tuple[Float[Array, "n D"], Float[Array, "n D"]]:
    """Bolukbasi's equalise for unit rows ``a[i]``, ``b[i]`` and a unit direction (module docstring, step 3)."""
    a, b, direction = jnp.asarray(a), jnp.asarray(b), jnp.asarray(direction)
    mu = (a + b) / 2
    nu = mu - (mu @ direction)[:, None] * direction
    z = jnp.sqrt(jnp.clip(1 - jnp.sum(nu * nu, axis=-1), 0.0))
    z = jnp.where((a - b) @ direction < 0, -z, z)[:, None]
    return nu + z * direction, nu - z * direction


@jax.jit
def _debias(
    unit: Float[Array, "V D"],
    direction: Float[Array, " D"],
    keep: Float[Array, " V"],
    pair_rows: Int[Array, "Q 2"],
    write_rows: Int[Array, " K"],
    write_from: Int[Array, " K"],
) -> Float[Array, "V D"]:
    out = jnp.where(keep[:, None], unit, neutralize(unit, direction))
    new_a, new_b = equalize(unit[pair_rows[:, 0]], unit[pair_rows[:, 1]], direction)
    values = jnp.stack([new_a, new_b], axis=1).reshape(-1, unit.shape[1])  # a0, b0, a1, b1, ...
    out = out.at[write_rows].set(values[write_from])
    return normalize_rows(out)


def _find(table: StaticEmbeddings, word: str) -> int | None:
    row = table.index.get(table.normalise(word))
    return row if row is not None else table.index.get(table.normalise(word.lower()))


def _exact(table: StaticEmbeddings, word: str) -> int | None:
    return table.index.get(table.normalise(word))


def _check_pairs(pairs: Sequence[Sequence[str]], name: str) -> list[tuple[str, str]]:
    checked = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, str) or len(pair) != 2 or not all(isinstance(w, str) and w for w in pair):
            raise DataError(f"{name}[{i}] {pair!r} is not a pair of two words")
        checked.append((pair[0], pair[1]))
    return checked


def hard_debias(
    table: StaticEmbeddings | Float[ArrayLike, "V D"],
    vocab: Sequence[str] | None = None,
    definitional_pairs: Sequence[Sequence[str]] | None = None,
    equalize_pairs: Sequence[Sequence[str]] | None = None,
    gender_specific: Sequence[str] | None = None,
) -> HardDebiasResult:
    """Hard Debias of a whole vector table (module docstring): a new ``StaticEmbeddings`` with the same
    words, every row unit length. ``table`` is a ``StaticEmbeddings`` or a ``(V, D)`` array with its words
    in ``vocab`` (then looked up case-sensitively, with the lower-case fallback). A list left ``None`` is
    debiaswe's (``jaxassoc.data.load_debiaswe_lists``). DataError when no definitional pair is in the
    vocabulary, or an equalise pair names one vocabulary row twice."""
    if not isinstance(table, StaticEmbeddings):
        if vocab is None:
            raise DataError("hard_debias: give the words of the vector array as `vocab` (or a StaticEmbeddings)")
        table = StaticEmbeddings(list(vocab), np.asarray(table), lowercase=False, source="vector array")
    elif vocab is not None:
        raise DataError("hard_debias: `vocab` is for a plain array; a StaticEmbeddings carries its own words")
    lists = load_debiaswe_lists() if None in (definitional_pairs, equalize_pairs, gender_specific) else None
    definitional = _check_pairs(
        lists.definitional_pairs if definitional_pairs is None else definitional_pairs, "definitional_pairs"
    )
    equal = _check_pairs(lists.equalize_pairs if equalize_pairs is None else equalize_pairs, "equalize_pairs")
    specific = list(lists.gender_specific if gender_specific is None else gender_specific)

    missing: dict[str, list[str]] = {"definitional_pairs": [], "equalize_pairs": [], "gender_specific": []}
    def_rows = []
    for a, b in definitional:
        rows = (_find(table, a), _find(table, b))
        missing["definitional_pairs"] += [w for w, r in zip((a, b), rows) if r is None]
        if None not in rows:
            def_rows.append(rows)
    if not def_rows:
        raise DataError(
            f"hard_debias: no definitional pair has both words in {table.source}; missing: "
            f"{missing['definitional_pairs']}"
        )

    keep = np.zeros(len(table.words), dtype=bool)
    for word in specific:
        row = _find(table, word)
        if row is None:
            missing["gender_specific"].append(word)
        else:
            keep[row] = True

    pair_rows: list[tuple[int, int]] = []
    equalized: list[tuple[str, str]] = []
    for a, b in equal:
        found = {w: False for w in (a, b)}
        for case in (str.lower, str.title, str.upper):
            rows = (_exact(table, case(a)), _exact(table, case(b)))
            found[a] |= rows[0] is not None
            found[b] |= rows[1] is not None
            if None in rows or rows in pair_rows:
                continue
            if rows[0] == rows[1]:
                raise DataError(f"equalize pair {(a, b)!r} names one word of {table.source} twice")
            pair_rows.append(rows)
            equalized.append((table.words[rows[0]], table.words[rows[1]]))
        missing["equalize_pairs"] += [w for w, hit in found.items() if not hit]

    # a row in several pairs takes its value from the last one, as in a loop over the pairs
    flat = [r for rows in pair_rows for r in rows]
    last = {r: i for i, r in enumerate(flat)}
    write_rows = np.array(list(last), dtype=np.int32)
    write_from = np.array(list(last.values()), dtype=np.int32)

    unit = normalize_rows(jnp.asarray(table.matrix, dtype=jnp.float32))
    direction = _direction(unit, jnp.asarray(def_rows, dtype=jnp.int32))
    matrix = _debias(
        unit,
        direction,
        jnp.asarray(keep),
        jnp.asarray(np.array(pair_rows, dtype=np.int32).reshape(-1, 2)),
        jnp.asarray(write_rows),
        jnp.asarray(write_from),
    )
    debiased = StaticEmbeddings(
        table.words, np.asarray(matrix), lowercase=table.lowercase, source=f"{table.source} (hard-debiased)"
    )
    return HardDebiasResult(
        debiased,
        np.asarray(direction),
        {k: tuple(dict.fromkeys(v)) for k, v in missing.items()},
        int(len(keep) - keep.sum()),
        tuple(equalized),
    )
