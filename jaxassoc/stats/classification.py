"""Binary classification scores and precision at k (docs/methods.md §5), jit-compiled.

Labels are binary with positive = 1 (bool or 0/1 numbers). A score whose denominator is zero (no
predicted positives for precision, no true positives for recall, neither for F1) is ``zero_division``,
0.0 by default (scikit-learn's returned value; it also warns).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import InputError


def _check_labels(y_true, y_pred, what: str) -> tuple[Array, Array]:
    """Equal shapes; labels in {0, 1} where values are concrete. Returns boolean arrays (positive = 1)."""
    if np.shape(y_true) != np.shape(y_pred):
        raise InputError(
            f"{what}: y_true and y_pred must have the same shape; got {np.shape(y_true)} and {np.shape(y_pred)}."
        )
    if np.size(y_true) == 0:
        raise InputError(f"{what}: no labels to score (empty arrays).")
    for name, y in (("y_true", y_true), ("y_pred", y_pred)):
        if not isinstance(y, jax.core.Tracer):
            bad = np.setdiff1d(np.unique(np.asarray(y)), [0, 1])
            if bad.size:
                raise InputError(
                    f"{what}: {name} must hold binary labels 0/1 (positive = 1); found {bad[:5].tolist()}."
                )
    return jnp.asarray(y_true) == 1, jnp.asarray(y_pred) == 1


def _ratio(num: Array, den: Array, zero_division: float) -> Float[Array, ""]:
    return jnp.where(den > 0, num / jnp.maximum(den, 1), zero_division).astype(jnp.float32)


@jax.jit
def _confusion(y_true: Bool[Array, "..."], y_pred: Bool[Array, "..."]) -> Int[Array, "3"]:
    """(true positives, false positives, false negatives)."""
    return jnp.stack([jnp.sum(y_true & y_pred), jnp.sum(~y_true & y_pred), jnp.sum(y_true & ~y_pred)])


def precision(y_true: Int[Array, "..."], y_pred: Int[Array, "..."], *, zero_division: float = 0.0) -> Float[Array, ""]:
    """TP / (TP + FP): the share of predicted positives that are positive."""
    tp, fp, _ = _confusion(*_check_labels(y_true, y_pred, "precision"))
    return _ratio(tp, tp + fp, zero_division)


def recall(y_true: Int[Array, "..."], y_pred: Int[Array, "..."], *, zero_division: float = 0.0) -> Float[Array, ""]:
    """TP / (TP + FN): the share of positives that are predicted positive."""
    tp, _, fn = _confusion(*_check_labels(y_true, y_pred, "recall"))
    return _ratio(tp, tp + fn, zero_division)


def f1_score(y_true: Int[Array, "..."], y_pred: Int[Array, "..."], *, zero_division: float = 0.0) -> Float[Array, ""]:
    """F1 = 2 TP / (2 TP + FP + FN), the harmonic mean of precision and recall (0 when TP = 0)."""
    tp, fp, fn = _confusion(*_check_labels(y_true, y_pred, "f1_score"))
    return _ratio(2 * tp, 2 * tp + fp + fn, zero_division)


@partial(jax.jit, static_argnames=("k", "largest"))
def _precision_at_k(scores, relevant, k: int, largest: bool) -> Float[Array, ""]:
    _, top = jax.lax.top_k(scores if largest else -scores, k)
    return jnp.mean(relevant[top].astype(jnp.float32))


def precision_at_k(
    scores: Float[Array, " n"], relevant: Bool[Array, " n"], k: int, *, largest: bool = True
) -> Float[Array, ""]:
    """Share of the k items with the highest scores (lowest with ``largest=False``) that are relevant.

    Equal scores at the cut are taken in index order (``jax.lax.top_k``). NaN scores are rejected.
    """
    if np.ndim(scores) != 1 or np.shape(scores) != np.shape(relevant):
        raise InputError(
            f"precision_at_k: scores and relevant must be 1-D of the same length; got {np.shape(scores)} and {np.shape(relevant)}."
        )
    n = np.shape(scores)[0]
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise InputError(f"precision_at_k: k must be an integer between 1 and the number of items ({n}); got {k!r}.")
    if not isinstance(scores, jax.core.Tracer) and np.isnan(np.asarray(scores, np.float64)).any():
        raise InputError("precision_at_k: scores contain NaN; drop those items or give them a score.")
    relevant = jnp.asarray(relevant).astype(bool)
    return _precision_at_k(jnp.asarray(scores, jnp.float32), relevant, int(k), bool(largest))
