"""One type for every linear concept eraser: the affine low-rank edit ``x' = x - ((x - mean) @ down) @ up``
(docs/methods.md §11.1).

LEACE, its ``orth`` variant, INLP and SentenceDebias all fit an :class:`Eraser`; only the factors differ.
It is a pytree of three arrays, so it jits, vmaps, shards and differentiates, and it is a site edit as it is
(``sites.Transform(eraser)``, :func:`as_edit`); erasers of every layer stack into one with a leading layer
axis (:func:`stack`) for a ``layers.*`` site.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxassoc.errors import InputError
from jaxassoc.models.sites import Transform


class Eraser(NamedTuple):
    """``x' = x - ((x - mean) @ down) @ up`` on the last axis of ``x`` (d wide): ``mean`` (d,), ``down``
    (d, k), ``up`` (k, d), ``k`` the edit's rank bound. The edit is computed in float32 (at least) and
    returned in ``x``'s dtype. Zero columns of ``down`` (directions a fit dropped) change nothing."""

    mean: Float[Array, " d"]
    down: Float[Array, "d k"]
    up: Float[Array, "k d"]

    def __call__(self, x: Float[Array, "... d"]) -> Float[Array, "... d"]:
        dtype = jnp.promote_types(x.dtype, jnp.float32)
        centred = x.astype(dtype) - self.mean.astype(dtype)
        out = x.astype(dtype) - (centred @ self.down.astype(dtype)) @ self.up.astype(dtype)
        return out.astype(x.dtype)

    @property
    def width(self) -> int:
        """d, the width of the states it erases."""
        return int(self.mean.shape[-1])

    def matrix(self) -> Float[Array, "d d"]:
        """``down @ up``: the erased rows are ``x - (x - mean) @ matrix`` (a layer axis first if stacked)."""
        return self.down @ self.up

    def rank(self, tol: float = 1e-6) -> int:
        """The rank of the edit ``down @ up`` (singular values above ``tol`` times the largest)."""
        s = np.linalg.svd(np.asarray(self.matrix(), np.float64), compute_uv=False)
        return int((s > tol * max(float(s.max()), np.finfo(np.float64).tiny)).sum())


def projection(directions: Float[Array, "d k"], mean: Float[Array, " d"] | None = None) -> Eraser:
    """The orthogonal projection removing the span of ``directions``' columns (orthonormal; zero columns
    allowed): ``x' = x - ((x - mean) V) Vᵀ``. INLP and SentenceDebias are such projections (``mean`` 0)."""
    d = directions.shape[0]
    mean = jnp.zeros((d,), directions.dtype) if mean is None else mean
    return Eraser(mean, directions, directions.T)


def as_edit(eraser: Eraser) -> Transform:
    """The eraser as a site edit: ``model.with_edits({site: as_edit(eraser)})`` (a ``layers.*`` site needs a
    :func:`stack` of one eraser per layer)."""
    return Transform(eraser)


def stack(erasers: Sequence[Eraser]) -> Eraser:
    """One eraser per layer as one with a leading layer axis (``layers.*`` sites), padding each ``k`` with
    zero columns to the largest. InputError when their widths differ."""
    widths = sorted({e.width for e in erasers})
    if not erasers or len(widths) != 1:
        raise InputError(f"stack needs erasers of one width; got widths {widths or 'none'}")
    k = max(int(e.down.shape[-1]) for e in erasers)

    def pad(e: Eraser) -> Eraser:
        extra = k - int(e.down.shape[-1])
        return Eraser(e.mean, jnp.pad(e.down, ((0, 0), (0, extra))), jnp.pad(e.up, ((0, extra), (0, 0))))

    return jax.tree.map(lambda *a: jnp.stack(a), *(pad(e) for e in erasers))


def check_states(x: np.ndarray | Array, what: str = "x") -> np.ndarray:
    """``x`` as a finite float (n, d) NumPy array with n >= 2; InputError naming ``what`` otherwise."""
    a = np.asarray(x)
    if a.ndim != 2 or not np.issubdtype(a.dtype, np.floating):
        raise InputError(f"{what}: states are a float (n, d) array, got {a.dtype} of shape {a.shape}")
    if a.shape[0] < 2:
        raise InputError(f"{what}: a fit needs at least two rows, got {a.shape[0]}")
    bad = ~np.isfinite(a).all(axis=1)
    if bad.any():
        raise InputError(
            f"{what}: {int(bad.sum())} of {a.shape[0]} rows have NaN or infinite values (first: row "
            f"{int(np.flatnonzero(bad)[0])})"
        )
    return a


def one_hot_labels(z: np.ndarray | Array, n: int, what: str = "z") -> np.ndarray:
    """Concept labels as an (n, k) float32 one-hot (or given) matrix: ``z`` (n,) integer classes (k the
    distinct values, in sorted order) or (n, k) already. InputError for a length other than n, or one class
    only (there is no concept to erase)."""
    a = np.asarray(z)
    if a.shape[0] != n or a.ndim not in (1, 2):
        raise InputError(f"{what}: labels are (n,) classes or (n, k) one-hot with n = {n} rows, got shape {a.shape}")
    if a.ndim == 1:
        if not np.issubdtype(a.dtype, np.integer):
            raise InputError(f"{what}: (n,) labels are integer classes, got {a.dtype}")
        classes, index = np.unique(a, return_inverse=True)
        a = np.eye(len(classes), dtype=np.float32)[index]
    distinct = np.unique(a, axis=0)
    if len(distinct) < 2:
        raise InputError(f"{what}: every row has the same label, so there is no concept to erase (one class only)")
    return a.astype(np.float32)
