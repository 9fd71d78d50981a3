"""SeT by optimisation (Cao et al. 2022, §3.1; docs/methods.md §3): the same objective as
:mod:`jaxassoc.metrics.set_exact`, solved with an augmented Lagrangian and optax L-BFGS, batched over
problems — and for what the exact solver cannot do: one ΔA shared by K contexts, each with its own gold.

Problem (one per batch entry): contexts x̃_1..x̃_K (x̃ = [x; 1], or x without a bias), gold tokens j_k,

    min ‖ΔA‖_F   s.t.   ((A + ΔA) x̃_k)_{j_k} ≥ ((A + ΔA) x̃_k)_i + γ   for all k, i ≠ j_k.

Span reduction (exact): with X̃ = Q R (QR, Q orthonormal columns, R ∈ R^{K×K}), every constraint sees
ΔA only through ΔA X̃ = (ΔA Q) R, and the part of ΔA orthogonal to span(Q) only adds norm; so
ΔA = M Qᵀ with M ∈ R^{V×K}, ‖ΔA‖_F = ‖M‖_F, and context k's logits move by M r_k (r_k = R[:, k]). For
K = 1 this is the δ x̃ᵀ/‖x̃‖² form of the exact solver.

Working set (exact when verified): a row i of M that no constraint touches is 0 at the optimum, and a
constraint inactive at the optimum can be dropped. We keep the ``candidates`` rows with the largest
violation max_k (z_{k,i} + γ − z_{k,j_k}) (gold rows always), solve on them, and then check every
dropped constraint on the full vocabulary: ``max_violation`` covers all V rows, and :func:`set_optax`
doubles the working set for any problem where a dropped constraint is violated.

Solver: augmented Lagrangian on the constraints scaled by 1/‖x̃_k‖ (so ρ acts in the units of M),
L(M, λ) = ½‖M‖² + (1/2ρ) Σ [max(0, λ + ρ h(M))² − λ²], ``n_outer`` multiplier updates
λ ← max(0, λ + ρ h), ρ growing geometrically, each after ``n_inner`` optax L-BFGS steps (zoom line search).

Sharding: problems are independent. :func:`set_optax_sharded` runs the kernel under ``jax.shard_map``
with the problem axis split over one or more mesh axes and the head replicated; each device solves its own
problems (no communication). The problem count must divide evenly over the devices; :func:`set_optax`
with a ``mesh`` pads each block to a multiple of the device count and drops the padding.

Convergence (:func:`optax_converged`): every constraint over the whole vocabulary holds within ``tol`` logit
units, and a problem that moved has a constraint within ``tol`` of tight (at the minimum one is tight).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, PartitionSpec
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from jaxassoc.errors import InputError
from jaxassoc.metrics.set_exact import MARGIN, check_set_inputs


class SolverSettings(NamedTuple):
    """Augmented-Lagrangian schedule (hashable: a static argument)."""

    n_outer: int = 20
    n_inner: int = 20
    rho_init: float = 1.0
    rho_growth: float = 2.0
    rho_max: float = 1e3  # larger ρ makes the inner problems ill-conditioned for L-BFGS in float32


class SharedSetResult(NamedTuple):
    """SeT with one ΔA shared by the contexts of each problem."""

    distance: Float[Array, " P"]  # ‖ΔA‖_F
    max_violation: Float[Array, " P"]  # max over all k, i ≠ j_k of γ − (z'_{k,j_k} − z'_{k,i}), logit units
    working_set_ok: Bool[Array, " P"]  # every constraint left out of the working set holds


def optax_converged(result: SharedSetResult, tol: float) -> np.ndarray:
    """Per problem: the working set sufficed, no constraint misses by more than ``tol`` (logit units), and a
    problem that moved (ΔA ≠ 0) has a constraint within ``tol`` of tight (the optimum touches the polytope)."""
    distance, violation, ok = (np.asarray(a) for a in result)
    return ok & (violation <= tol) & ((distance == 0) | (violation >= -tol))


def _reduced_problem(logits, gold, valid, margin, candidates):
    """Rows kept in the working set, their logits (K, T) and the golds' positions among them."""
    V = logits.shape[-1]
    gold_logit = jnp.take_along_axis(logits, gold[:, None], axis=-1)
    gap = jnp.where(valid[:, None], logits + margin - gold_logit, -jnp.inf).max(axis=0)
    is_gold = jnp.zeros(V, bool).at[gold].set(valid)
    if candidates is None or candidates >= V:
        rows = jnp.arange(V)
    else:
        rows = jax.lax.top_k(jnp.where(is_gold, jnp.inf, gap), candidates)[1]
    sub = logits[:, rows]
    gold_pos = jnp.argmax(rows[None, :] == gold[:, None], axis=-1)
    return rows, sub, gold_pos


def _violations(logits_new, gold_pos, valid, margin):
    """γ − (z'_j − z'_i) for every context and row, −inf where no constraint applies."""
    gold_logit = jnp.take_along_axis(logits_new, gold_pos[:, None], axis=-1)
    viol = margin - (gold_logit - logits_new)
    not_gold = jnp.arange(logits_new.shape[-1])[None, :] != gold_pos[:, None]
    return jnp.where(valid[:, None] & not_gold, viol, -jnp.inf)


def _solve_reduced(sub, r, gold_pos, valid, margin, settings: SolverSettings):
    """Augmented Lagrangian + L-BFGS on M (T, K) for one problem."""
    scale = jnp.where(valid, jnp.linalg.norm(r, axis=0), 1.0)  # ‖x̃_k‖

    def h(M):  # scaled constraints, (K, T), ≤ 0 when satisfied; 0 where no constraint applies
        viol = _violations(sub + (M @ r).T, gold_pos, valid, margin)
        return jnp.where(jnp.isfinite(viol), viol / scale[:, None], 0.0)

    def lagrangian(M, lam, rho):
        return 0.5 * jnp.sum(M * M) + jnp.sum(jnp.maximum(0.0, lam + rho * h(M)) ** 2 - lam**2) / (2 * rho)

    opt = optax.lbfgs()  # zoom line search: backtracking is faster but stalls on some problems

    def inner(M, lam, rho):
        fun = functools.partial(lagrangian, lam=lam, rho=rho)
        value_and_grad = optax.value_and_grad_from_state(fun)

        def step(carry, _):
            M, state = carry
            value, grad = value_and_grad(M, state=state)
            updates, state = opt.update(grad, state, M, value=value, grad=grad, value_fn=fun)
            return (optax.apply_updates(M, updates), state), None

        (M, _), _ = jax.lax.scan(step, (M, opt.init(M)), None, length=settings.n_inner)
        return M

    def outer(carry, _):
        M, lam, rho = carry
        M = inner(M, lam, rho)
        lam = jnp.maximum(0.0, lam + rho * h(M))
        return (M, lam, jnp.minimum(rho * settings.rho_growth, settings.rho_max)), None

    M0 = jnp.zeros((sub.shape[-1], r.shape[0]), sub.dtype)
    init = (M0, jnp.zeros_like(sub), jnp.asarray(settings.rho_init, sub.dtype))
    (M, _, _), _ = jax.lax.scan(outer, init, None, length=settings.n_outer)
    return M


def _solve_parts(W, b, x, gold, valid, margin, candidates, settings):
    """One problem's logits (K, V), the working set's rows, the solution M (T, K) and X̃ᵀ = Q R's factors."""
    x = jnp.where(valid[:, None], x, 0.0)
    logits = x @ W.T if b is None else x @ W.T + b
    xt = x if b is None else jnp.concatenate([x, valid[:, None].astype(x.dtype)], axis=1)
    q, r = jnp.linalg.qr(xt.T)  # (D̃, K), (K, K)
    rows, sub, gold_pos = _reduced_problem(logits, gold, valid, margin, candidates)
    return logits, rows, _solve_reduced(sub, r, gold_pos, valid, margin, settings), q, r


def _solve_one(W, b, x, gold, valid, margin, candidates, settings):
    """One problem: logits of its K contexts, the span basis, the working set, the solve, the check."""
    logits, rows, M, _, r = _solve_parts(W, b, x, gold, valid, margin, candidates, settings)
    change = jnp.zeros_like(logits).at[:, rows].set((M @ r).T)
    viol = _violations(logits + change, gold, valid, margin)
    kept = jnp.zeros(logits.shape[-1], bool).at[rows].set(True)
    dropped_ok = jnp.all(jnp.where(kept[None, :], True, viol <= 0.0))
    return SharedSetResult(distance=jnp.sqrt(jnp.sum(M * M)), max_violation=jnp.max(viol), working_set_ok=dropped_ok)


@functools.partial(jax.jit, static_argnames=("margin", "candidates", "settings", "chunk"))
def set_optax_kernel(
    W: Float[Array, "V D"],
    b: Float[Array, " V"] | None,
    x: Float[Array, "P K D"],
    gold: Int[Array, "P K"],
    valid: Bool[Array, "P K"],
    margin: float = MARGIN,
    candidates: int | None = 64,
    settings: SolverSettings = SolverSettings(),
    chunk: int = 256,
) -> SharedSetResult:
    """Shared-ΔA SeT of P problems of K contexts (padded contexts have ``valid`` False), ``chunk``
    problems at a time (vmapped). Assumes valid inputs (see :func:`set_optax`)."""
    solve = functools.partial(_solve_one, W, b, margin=margin, candidates=candidates, settings=settings)
    return jax.lax.map(lambda a: solve(*a), (x, gold, valid), batch_size=chunk)


@functools.partial(jax.jit, static_argnames=("margin", "candidates", "settings"))
def set_optax_update(
    W: Float[Array, "V D"],
    b: Float[Array, " V"] | None,
    x: Float[Array, "K D"],
    gold: Int[Array, " K"],
    valid: Bool[Array, " K"],
    margin: float = MARGIN,
    candidates: int | None = None,
    settings: SolverSettings = SolverSettings(),
) -> tuple[Float[Array, "V D"], Float[Array, " V"] | None]:
    """The change (ΔW, Δb) of the head that one problem's K contexts share: ΔA = M Qᵀ on the working set's
    rows (span reduction, module docstring), ‖ΔA‖_F = the problem's ``distance``. No working-set check or
    retry (``candidates=None``, the default, keeps every row): the analogue of ``set_exact.set_update``."""
    logits, rows, M, q, _ = _solve_parts(W, b, x, gold, valid, margin, candidates, settings)
    delta = jnp.zeros((logits.shape[-1], q.shape[0]), logits.dtype).at[rows].set(M @ q.T)
    return (delta, None) if b is None else (delta[:, :-1], delta[:, -1])


def _check_shared_inputs(W, b, x, gold, valid) -> np.ndarray:
    x_shape = np.shape(x)
    if len(x_shape) != 3:
        raise InputError(f"SeT (optax): x must be (problems, contexts, dim); got shape {x_shape}")
    if np.shape(gold) != x_shape[:2]:
        raise InputError(f"SeT (optax): gold must be (problems, contexts) = {x_shape[:2]}; got {np.shape(gold)}")
    valid = np.ones(x_shape[:2], bool) if valid is None else np.asarray(valid, bool)
    if valid.shape != x_shape[:2] or not valid.any(axis=1).all():
        raise InputError("SeT (optax): valid must be (problems, contexts) with at least one valid context per problem")
    P, K, D = x_shape
    check_set_inputs(W, b, np.reshape(x, (P * K, D)), np.reshape(gold, (P * K,)))
    return valid


def set_optax(
    W: ArrayLike,
    b: ArrayLike | None,
    x: ArrayLike,
    gold: ArrayLike,
    valid: ArrayLike | None = None,
    *,
    margin: float = MARGIN,
    candidates: int | None = 64,
    settings: SolverSettings = SolverSettings(),
    chunk: int = 256,
    block: int = 1024,
    tol: float = 1e-3,
    mesh: Mesh | None = None,
) -> SharedSetResult:
    """SeT with one ΔA per problem shared by its contexts: ``x`` (P, K, D), ``gold`` (P, K).

    Problems run ``block`` at a time (the last block padded), so one compilation serves any P. A problem
    whose dropped constraints turn out violated is solved again with twice the working set (up to the
    whole vocabulary; ``candidates=None`` starts there); one whose constraints still miss by more than
    ``tol`` (logit units), or that moved (ΔA ≠ 0) while every constraint stays loose by more than ``tol``
    (not converged: at the minimum some constraint is tight), is solved once more with twice the
    iterations. Infeasible problems (x̃_k = 0, or collinear contexts asking for different golds) keep a
    positive ``max_violation``: check it (:func:`optax_converged`). With a ``mesh``, each block's problems are
    split over all its devices (:func:`set_optax_sharded`; the block padded to a multiple of their count).
    """
    valid = _check_shared_inputs(W, b, x, gold, valid)
    if margin <= 0:
        raise InputError(f"SeT: the margin γ must be positive; got {margin}")
    W, b = jnp.asarray(W), None if b is None else jnp.asarray(b)
    x, gold = np.asarray(x), np.asarray(gold)
    V, P = W.shape[0], x.shape[0]
    devices = 1 if mesh is None else mesh.size
    size = -(-min(block, P) // devices) * devices
    kernel = set_optax_kernel if mesh is None else functools.partial(set_optax_sharded, mesh, mesh.axis_names)

    def solve(idx, cand, sett):
        parts = []
        for start in range(0, len(idx), size):
            part = idx[start : start + size]
            padded = np.concatenate([part, np.repeat(part[:1], size - len(part))])
            res = kernel(
                W,
                b,
                jnp.asarray(x[padded]),
                jnp.asarray(gold[padded]),
                jnp.asarray(valid[padded]),
                margin=float(margin),
                candidates=None if cand is None or cand >= V else cand,
                settings=sett,
                chunk=min(chunk, size // devices),
            )
            parts.append([np.asarray(a)[: len(part)] for a in res])
        return [np.concatenate(field) for field in zip(*parts)]

    def redo(result, idx, cand, sett):
        for field, values in zip(result, solve(idx, cand, sett)):
            field[idx] = values

    result = solve(np.arange(P), candidates, settings)
    ok = 2  # SharedSetResult.working_set_ok
    while candidates is not None and candidates < V and not result[ok].all():
        candidates = min(2 * candidates, V)
        redo(result, np.flatnonzero(~result[ok]), candidates, settings)
    slow = np.flatnonzero(~optax_converged(SharedSetResult(*result), tol))
    if slow.size:
        longer = settings._replace(n_outer=2 * settings.n_outer, n_inner=2 * settings.n_inner)
        redo(result, slow, candidates, longer)
    return SharedSetResult(*(jnp.asarray(v) for v in result))


def set_optax_sharded(
    mesh: Mesh,
    axis: str | tuple[str, ...],
    W: Float[Array, "V D"],
    b: Float[Array, " V"] | None,
    x: Float[Array, "P K D"],
    gold: Int[Array, "P K"],
    valid: Bool[Array, "P K"],
    **kernel_options,
) -> SharedSetResult:
    """:func:`set_optax_kernel` with the problem axis split over the mesh axis ``axis`` (or several axes
    together; the head replicated)."""
    devices = int(np.prod([mesh.shape[a] for a in ((axis,) if isinstance(axis, str) else axis)]))
    if x.shape[0] % devices:
        raise InputError(
            f"SeT (optax, sharded): {x.shape[0]} problems do not split evenly over {devices} devices; pad the batch"
        )
    kernel = functools.partial(set_optax_kernel, **kernel_options)
    spec = PartitionSpec(axis)
    head_spec = (PartitionSpec(), None if b is None else PartitionSpec())
    sharded = jax.shard_map(
        lambda W, b, x, g, v: kernel(W, b, x, g, v),
        mesh=mesh,
        in_specs=(*head_spec, spec, spec, spec),
        out_specs=SharedSetResult(spec, spec, spec),
        check_vma=False,  # optax's line search mixes replicated and per-device values in lax.cond
    )
    return sharded(W, b, x, gold, valid)
