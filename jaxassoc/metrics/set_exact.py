"""SeT, the Sensitivity Test (Cao et al. 2022, §3.1 "Sensitivity Test"): the smallest change of the output
layer that makes a trait token win its context by a margin, solved exactly.

For one context with head input x (after the final norm / MLM head transform), head A = [W | b] and
x̃ = [x; 1] (x̃ = x for a head without bias), SeT solves

    min ‖ΔA‖_F   s.t.   ((A + ΔA) x̃)_j ≥ ((A + ΔA) x̃)_i + γ   for all i ≠ j            (SeT)

with gold token j and margin γ = 1. Every constraint reads ΔA only through ΔA x̃, so a component of ΔA
orthogonal to x̃ adds norm and changes no constraint: the optimum is ΔA = δ x̃ᵀ / ‖x̃‖², where δ is the
Euclidean projection of the logits z = A x̃ onto the polytope {z' : z'_j ≥ z'_i + γ ∀ i ≠ j}, and
‖ΔA‖_F = ‖δ‖ / ‖x̃‖ (the authors' ``multiclassUpdate.py`` solves the same problem in the scaled
variable δ / ‖x̃‖²).

The projection ("column squishing", Bittorf et al. 2012, Alg. 5; Daumé & Kumar 2017): with the shifted
competitors c_i = z_i + γ, the gold logit is pooled with every competitor above the pool's mean μ, and the
pool is set to μ: z'_j = μ, z'_i = μ − γ for pooled i, all other logits unchanged. μ is the root of the
convex, decreasing, piecewise-linear f(μ) = (z_j − μ) + Σ_{i≠j} max(c_i − μ, 0). The original sorts the
competitors and scans them; we instead run Newton's method on f from μ₀ = z_j (each step
μ ← (z_j + Σ_{c_i > μ} c_i) / (1 + #{c_i > μ}) stays left of the root by convexity and lands on it
exactly once the pool stops changing), which costs a few passes over the vocabulary instead of an
O(V log V) sort — XLA's CPU sort is slow (about 27 s for 1,000 × 50,000 logits on 2 cores, where
``lax.top_k`` of 64 takes 0.4 s).

Degenerate and invalid inputs: x̃ = 0 (only possible without a bias column) leaves every logit at 0
whatever ΔA is, so (SeT) is infeasible: ``distance`` is +inf and ``feasible`` False. With a single-token
vocabulary there is nothing to beat: distance 0. Non-finite inputs and out-of-range gold ids are refused
host-side by :func:`check_set_inputs` (inside jit a gold id would be silently clamped).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int

from jaxassoc.errors import InputError

MARGIN = 1.0  # γ of Cao et al. (2022)
_MAX_NEWTON_STEPS = 1_000  # each step moves at least one competitor across μ; a handful is typical


class LogitProjection(NamedTuple):
    """The projection of one logit vector onto {z' : z'_j ≥ z'_i + γ}: z'_j = pool_mean, pooled z'_i = pool_mean − γ."""

    pool_mean: Float[Array, ""]  # μ
    pool_size: Int[Array, ""]  # competitors lowered to μ − γ (the gold token not counted)
    shift_norm: Float[Array, ""]  # ‖δ‖ = ‖z' − z‖
    converged: Bool[Array, ""]  # Newton reached the fixed point within the step cap


class SetResult(NamedTuple):
    """SeT of a batch of contexts (Cao et al. 2022, §3.1)."""

    distance: Float[Array, " *batch"]  # ‖ΔA‖_F = ‖δ‖ / ‖x̃‖; +inf when infeasible
    shift_norm: Float[Array, " *batch"]  # ‖δ‖, the change of the logits
    pool_size: Int[Array, " *batch"]  # competitors pooled with the gold token
    feasible: Bool[Array, " *batch"]  # False when x̃ = 0
    converged: Bool[Array, " *batch"]  # always True in practice; False flags a result to distrust


def _pool_mean(z_gold: Float[Array, ""], c: Float[Array, " V"], mu: Float[Array, ""]):
    """One Newton step on f: the mean of the gold logit and the competitors above ``mu``."""
    above = c > mu
    return (z_gold + jnp.sum(jnp.where(above, c, 0.0))) / (jnp.sum(above) + 1)


def project_logits(z: Float[Array, " V"], gold: Int[Array, ""], margin: float = MARGIN) -> LogitProjection:
    """Column squishing (see the module docstring) for one logit vector; differentiable in ``z``.

    The pool is found by Newton's method without gradient; μ and ‖δ‖ are then recomputed from the pool
    (piecewise-linear in z, so the pool is locally constant and this gives the true derivative).
    """
    is_gold = jnp.arange(z.shape[0]) == gold
    z_gold = z[gold]
    c = z + margin

    def cond(state):
        step, mu, prev = state
        return (step < _MAX_NEWTON_STEPS) & (mu > prev)

    def body(state):
        step, mu, _ = state
        return step + 1, _pool_mean(sg_gold, sg_c, mu), mu

    sg_gold = jax.lax.stop_gradient(z_gold)
    sg_c = jnp.where(is_gold, -jnp.inf, jax.lax.stop_gradient(c))  # the gold token never competes
    start = (jnp.asarray(1), _pool_mean(sg_gold, sg_c, sg_gold), sg_gold)
    _, mu, prev = jax.lax.while_loop(cond, body, start)
    pooled = sg_c > mu
    count = jnp.sum(pooled)
    mu_diff = (z_gold + jnp.sum(jnp.where(pooled, c, 0.0))) / (count + 1)
    sq = (mu_diff - z_gold) ** 2 + jnp.sum(jnp.where(pooled, (mu_diff - c) ** 2, 0.0))
    return LogitProjection(pool_mean=mu_diff, pool_size=count, shift_norm=_safe_sqrt(sq), converged=~(mu > prev))


def _safe_sqrt(sq: Float[Array, "*s"]) -> Float[Array, "*s"]:
    """sqrt with a zero (not NaN) gradient at 0: a gold token that already wins has distance 0."""
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def projection_delta(z: Float[Array, " V"], gold: Int[Array, ""], margin: float = MARGIN) -> Float[Array, " V"]:
    """δ = z' − z, the whole logit change of one problem (ΔA = δ x̃ᵀ / ‖x̃‖²)."""
    proj = project_logits(z, gold, margin)
    is_gold = jnp.arange(z.shape[0]) == gold
    pooled = (z + margin > proj.pool_mean) & ~is_gold
    target = jnp.where(is_gold, proj.pool_mean, jnp.where(pooled, proj.pool_mean - margin, z))
    return target - z


@functools.partial(jax.jit, static_argnames=("margin",))
def set_from_logits(
    logits: Float[Array, "N V"], x_sqnorm: Float[Array, " N"], gold: Int[Array, " N"], margin: float = MARGIN
) -> SetResult:
    """SeT from precomputed logits z = A x̃ and ‖x̃‖² (vmapped over the N contexts)."""
    proj = jax.vmap(project_logits, in_axes=(0, 0, None))(logits, gold, margin)
    feasible = (x_sqnorm > 0) | (logits.shape[-1] == 1)
    scale = jnp.where(x_sqnorm > 0, jnp.sqrt(jnp.where(x_sqnorm > 0, x_sqnorm, 1.0)), 1.0)
    distance = jnp.where(feasible, jnp.where(proj.shift_norm > 0, proj.shift_norm / scale, 0.0), jnp.inf)
    return SetResult(
        distance=distance,
        shift_norm=proj.shift_norm,
        pool_size=proj.pool_size,
        feasible=feasible,
        converged=proj.converged,
    )


def _augmented_sqnorm(x: Float[Array, "N D"], has_bias: bool) -> Float[Array, " N"]:
    """‖x̃‖² with x̃ = [x; 1] (or x without a bias column)."""
    return jnp.sum(x * x, axis=-1) + (1.0 if has_bias else 0.0)


@functools.partial(jax.jit, static_argnames=("margin", "chunk"))
def set_exact_kernel(
    W: Float[Array, "V D"],
    b: Float[Array, " V"] | None,
    x: Float[Array, "N D"],
    gold: Int[Array, " N"],
    margin: float = MARGIN,
    chunk: int = 64,
) -> SetResult:
    """SeT of N contexts against one head (W, b): logits and projections ``chunk`` contexts at a time,
    so memory stays O(chunk · V). Assumes valid inputs (see :func:`set_exact`)."""

    def one(args):
        xi, gi = args
        z = W @ xi if b is None else W @ xi + b
        return set_from_logits(z[None], _augmented_sqnorm(xi[None], b is not None), gi[None], margin)

    out = jax.lax.map(one, (x, gold), batch_size=chunk)
    return jax.tree_util.tree_map(lambda a: a[:, 0], out)


def check_set_inputs(W: ArrayLike, b: ArrayLike | None, x: ArrayLike, gold: ArrayLike) -> None:
    """Host-side gate: shapes agree, gold ids are in the vocabulary, everything is finite.

    Raises :class:`~jaxassoc.errors.InputError` naming the offending input.
    """
    W_shape, x_shape, gold_shape = np.shape(W), np.shape(x), np.shape(gold)
    if len(W_shape) != 2:
        raise InputError(f"SeT: the head matrix W must be (vocab, dim); got shape {W_shape}")
    V, D = W_shape
    if b is not None and np.shape(b) != (V,):
        raise InputError(f"SeT: the head bias b must have shape ({V},) to match W; got {np.shape(b)}")
    if len(x_shape) != 2 or x_shape[1] != D:
        raise InputError(f"SeT: head inputs x must be (contexts, {D}) to match W {W_shape}; got {x_shape}")
    if gold_shape != (x_shape[0],):
        raise InputError(f"SeT: need one gold token id per context: x has {x_shape[0]} rows, gold shape {gold_shape}")
    gold_np = np.asarray(gold)
    if not np.issubdtype(gold_np.dtype, np.integer):
        raise InputError(f"SeT: gold token ids must be integers; got dtype {gold_np.dtype}")
    bad = np.flatnonzero((gold_np < 0) | (gold_np >= V))
    if bad.size:
        raise InputError(
            f"SeT: gold token ids {gold_np[bad[:5]].tolist()} (contexts {bad[:5].tolist()}) are outside the "
            f"vocabulary of {V} tokens; tokenise the traits with the model's own tokenizer"
        )
    for name, arr in (("x", x), ("W", W), ("b", b)):
        if arr is not None and not bool(jnp.all(jnp.isfinite(jnp.asarray(arr)))):
            raise InputError(f"SeT: {name} has NaN or infinite entries; check the forward pass that produced it")


def set_exact(
    W: ArrayLike,
    b: ArrayLike | None,
    x: ArrayLike,
    gold: ArrayLike,
    *,
    margin: float = MARGIN,
    chunk: int = 64,
) -> SetResult:
    """SeT (Cao et al. 2022, §3.1) of N contexts: ``x`` (N, D) head inputs, ``gold`` (N,) trait token ids,
    head ``W`` (V, D) and bias ``b`` (V,) or None. Checks the inputs, then runs :func:`set_exact_kernel`."""
    check_set_inputs(W, b, x, gold)
    if margin <= 0:
        raise InputError(f"SeT: the margin γ must be positive; got {margin}")
    return set_exact_kernel(
        jnp.asarray(W), None if b is None else jnp.asarray(b), jnp.asarray(x), jnp.asarray(gold), float(margin), chunk
    )


def set_update(
    W: Float[Array, "V D"],
    b: Float[Array, " V"] | None,
    x: Float[Array, " D"],
    gold: Int[Array, ""],
    margin: float = MARGIN,
) -> tuple[Float[Array, "V D"], Float[Array, " V"] | None]:
    """The optimal change (ΔW, Δb) of the head for one context: ΔA = δ x̃ᵀ / ‖x̃‖² (V × (D+1) floats)."""
    z = W @ x if b is None else W @ x + b
    sqnorm = _augmented_sqnorm(x[None], b is not None)[0]
    delta = projection_delta(z, gold, margin) / sqnorm
    return jnp.outer(delta, x), (None if b is None else delta)
