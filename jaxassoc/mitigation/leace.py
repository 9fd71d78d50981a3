"""LEACE, least-squares concept erasure (Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed
form", Thm. 4.3 and §4.2), and its ``orth`` variant; docs/methods.md §11.2.

With mean ``μ``, covariance ``Σ`` of the states and cross-covariance ``Σxz`` with the (centred) one-hot
labels, the eraser is ``x' = x - P(x - μ)`` where, with the whitening ``W = Σ^{-1/2}`` and the orthonormal
basis ``U`` of ``W Σxz``'s column space (singular values above ``svd_tol``), ``P = W⁺ U Uᵀ W``. We compute the
same map without forming ``W``: ``P = Σxz E S⁻² Eᵀ Σxzᵀ Σ⁺`` (row form: ``down = Σ⁺ Σxz E S⁻¹``, ``up =
S⁻¹ Eᵀ Σxzᵀ``, from the eigenpairs ``(S², E)`` of the k x k matrix ``Σxzᵀ Σ⁺ Σxz``), which stays accurate in
float32 where whitening an outlier dimension loses digits. ``orth`` takes ``W = I`` (the orthogonal
projection off ``Σxz``'s columns). The trace constraint (the package's default) blends ``P`` toward the
orthogonal projector ``I - U Uᵀ`` when ``P`` would raise the states' total variance, which matters when the
erased states go back into a model.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxassoc.errors import InputError
from jaxassoc.mitigation.eraser import Eraser, check_states, one_hot_labels

METHODS = ("leace", "orth")


def fit_leace(
    x: Float[Array, "n d"],
    z: Array,
    *,
    method: str = "leace",
    shrinkage: bool = True,
    svd_tol: float = 0.01,
    constrain_trace: bool = True,
    affine: bool = True,
) -> Eraser:
    """The LEACE eraser of the concept ``z`` from the states ``x`` (n, d): ``z`` (n,) integer classes or
    (n, k) one-hot. ``method="orth"``: no whitening. ``shrinkage``: the covariance shrunk toward
    ``tr(Σ)/d · I`` (the package's optimal linear shrinkage); without it, fewer rows than dimensions are
    refused. ``svd_tol``: singular values of the whitened cross-covariance at or below it are dropped.
    ``constrain_trace`` (LEACE only): the erased states' total variance never exceeds the original's.
    ``affine=False``: a linear map (``mean`` 0). The result's rank is at most k - 1.

    InputError for states that are not a finite (n, d) float array, labels of another length, one class only.
    """
    if method not in METHODS:
        raise InputError(f"fit_leace: method={method!r}; choose one of {list(METHODS)}")
    if svd_tol <= 0:
        raise InputError(f"fit_leace: svd_tol={svd_tol} must be positive")
    a = check_states(x, "fit_leace x")
    labels = one_hot_labels(z, a.shape[0], "fit_leace z")
    n, d = a.shape
    if method == "leace" and not shrinkage and n <= d:
        raise InputError(
            f"fit_leace: {n} rows for {d} dimensions: the covariance is singular; pass shrinkage=True (the default) "
            "or fit on more states"
        )
    return _fit(jnp.asarray(a, jnp.float32), jnp.asarray(labels), method, shrinkage, float(svd_tol),
                constrain_trace and method == "leace", affine)  # fmt: skip


def shrunk_covariance(s: Float[Array, "d d"], n: int | Array) -> Float[Array, "d d"]:
    """Optimal linear shrinkage of the sample covariance ``s`` (normalised by n) toward ``tr(s)/d · I`` (Chen
    et al. 2013's estimator as the concept-erasure package applies it): ``α s + (1 - α) tr(s)/d · I``,
    ``α`` computed on ``s`` scaled to unit mean variance (the package's ``eps`` guard would otherwise swamp
    float32 states of small scale)."""
    p = s.shape[-1]
    eps = jnp.finfo(s.dtype).eps
    unit = jnp.trace(s) / p
    s1 = s / jnp.where(unit > 0, unit, 1.0)  # α is scale-free; at unit scale the package's eps stays negligible
    trace = jnp.trace(s1)
    target = trace / p * jnp.eye(p, dtype=s.dtype)
    target_sq = trace**2 / p  # ||target||_F^2 = tr(s1 @ target)
    top = trace**2 * target_sq / n
    bottom = jnp.sum((s1 - target) ** 2) * target_sq  # = ||s1||^2 ||target||^2 - tr(s1 target)^2, no cancellation
    alpha = 1 - (top + eps) / (bottom + eps)
    return alpha * s + (1 - alpha) * unit * jnp.eye(p, dtype=s.dtype)


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5, 6))
def _fit(x, z, method, shrinkage, svd_tol, constrain_trace, affine) -> Eraser:
    n, d = x.shape
    mean = jnp.mean(x, axis=0)
    xc = x - mean
    zc = z - jnp.mean(z, axis=0)
    hi = jax.lax.Precision.HIGHEST
    cross = jnp.matmul(xc.T, zc, precision=hi) / (n - 1)  # Σxz (d, k)
    if method == "leace":
        gram = jnp.matmul(xc.T, xc, precision=hi)
        gram = (gram + gram.T) / 2
        sigma = shrunk_covariance(gram / n, n) if shrinkage else gram / (n - 1)
        scale = jnp.sqrt(jnp.diag(sigma))
        scale = jnp.where(scale > 0, scale, 1.0)
        evals, evecs = jnp.linalg.eigh(sigma / scale[:, None] / scale[None, :])  # Jacobi-scaled: fewer lost digits
        kept = evals > evals[-1] * d * jnp.finfo(x.dtype).eps  # torch.linalg.pinv's threshold, as the package
        inv = jnp.where(kept, 1 / jnp.where(kept, evals, 1.0), 0.0)
        scaled = jnp.matmul(evecs * inv, jnp.matmul(evecs.T, cross / scale[:, None], precision=hi), precision=hi)
        solved = scaled / scale[:, None]  # Σ⁺ Σxz
    else:
        solved = cross
    small = jnp.matmul(cross.T, solved, precision=hi)  # Σxzᵀ Σ⁺ Σxz = (W Σxz)ᵀ (W Σxz), k x k
    s2, basis = jnp.linalg.eigh((small + small.T) / 2)
    s = jnp.sqrt(jnp.maximum(s2, 0.0))
    inv_s = jnp.where(s > svd_tol, 1 / jnp.where(s > svd_tol, s, 1.0), 0.0)
    down = jnp.matmul(solved, basis, precision=hi) * inv_s  # (d, k)
    up = (basis * inv_s).T @ cross.T  # (k, d)
    if constrain_trace:
        down, up = _constrain_trace(sigma, cross, basis, inv_s, down, up)
    return Eraser(mean if affine else jnp.zeros_like(mean), down, up)


def _constrain_trace(sigma, cross, basis, inv_s, down, up):
    """Blend ``P = I - (down @ up)ᵀ`` with ``Q = I - U Uᵀ`` (``U`` the orthonormal basis of ``W Σxz``) so that
    ``tr(P Σ Pᵀ)`` does not exceed ``tr(Σ)`` (the package's quadratic for the mixing weight α); the blend
    ``I - (α P + (1 - α) Q) = α (down @ up)ᵀ + (1 - α) U Uᵀ`` is kept as factors of width 2k."""
    hi = jax.lax.Precision.HIGHEST
    d = sigma.shape[0]
    eye = jnp.eye(d, dtype=sigma.dtype)
    evals, evecs = jnp.linalg.eigh(sigma)
    kept = evals > evals[-1] * d * jnp.finfo(sigma.dtype).eps
    evals = jnp.maximum(evals, 0.0)
    whiten = (evecs * jnp.where(kept, jax.lax.rsqrt(jnp.where(kept, evals, 1.0)), 0.0)) @ evecs.T
    u = jnp.matmul(whiten, jnp.matmul(cross, basis, precision=hi), precision=hi) * inv_s  # (d, k) orthonormal
    p = eye - (down @ up).T
    q = eye - u @ u.T
    old = jnp.trace(sigma)
    new = jnp.trace(p @ sigma @ p.T)
    y = 2 * jnp.trace(p @ sigma @ q.T)
    zq = jnp.trace(q @ sigma @ q.T)
    discr = jnp.sqrt(jnp.maximum(4 * old * new - 4 * old * y + 4 * old * zq - 4 * new * zq + y**2, 0.0))
    denom = new - y + zq
    alpha1 = (-y / 2 + zq - discr / 2) / denom
    alpha2 = (-y / 2 + zq + discr / 2) / denom
    alpha = jnp.clip(jnp.where(alpha1 > 0, alpha1, alpha2), 0.0, 1.0)
    alpha = jnp.where(new > old, alpha, 1.0)
    return jnp.concatenate([down, u], axis=1), jnp.concatenate([alpha * up, (1 - alpha) * u.T], axis=0)
