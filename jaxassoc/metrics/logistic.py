"""L2-penalised logistic regression in JAX, for RNSB's sentiment classifier (Sweeney & Najafian 2019 §3;
WEFE's default: scikit-learn's ``LogisticRegression(solver="liblinear")``, C = 1).

The objective is liblinear's: with x̃ = [x, 1] (the intercept a feature of scale 1, so it is penalised
too) and labels y in {-1, +1},

    min_w  ½ ||w||² + C Σ_i m_i log(1 + exp(-y_i w·x̃_i))

where the weights m_i in {0, 1} leave the held-out words out (static shapes under ``jit``). It is
strictly convex; :func:`fit_logistic` runs a fixed number of damped Newton steps from w = 0, so the
result is deterministic and differentiable through the unrolled steps. The Newton system
(I + X̃ᵀSX̃) is solved in the n x n form (Woodbury), n the number of training words, so a step costs
O(n²D + n³), not O(D³), for D-dimensional vectors of a large model.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

NEWTON_STEPS = 50
"""Damped Newton steps of :func:`fit_logistic` (the objective converges in well under 20 on word sets)."""
_STEP_SIZES = tuple(2.0**-i for i in range(8))  # each Newton step keeps the best of these fractions of the full step
# (a tuple, not an array: importing jaxassoc must not start JAX's backend before jax.distributed.initialize)


def _with_intercept(x: Float[Array, "n D"]) -> Float[Array, "n D+1"]:
    return jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)


def logistic_objective(
    w: Float[Array, " D+1"], x: Float[Array, "n D"], y: Float[Array, " n"], mask: Float[Array, " n"], c: float
) -> Float[Array, ""]:
    """½ ||w||² + C Σ m_i log(1 + exp(-y_i w·[x_i, 1])) (liblinear's primal, intercept penalised)."""
    margins = y * (_with_intercept(x) @ w)
    return 0.5 * jnp.sum(w**2) + c * jnp.sum(mask * jnp.logaddexp(0.0, -margins))


@functools.partial(jax.jit, static_argnames="steps")
def fit_logistic(
    x: Float[Array, "n D"],
    y: Float[Array, " n"],
    mask: Float[Array, " n"],
    c: float = 1.0,
    *,
    steps: int = NEWTON_STEPS,
) -> Float[Array, " D+1"]:
    """The weights [w, b] minimising :func:`logistic_objective` (``steps`` damped Newton steps from 0)."""
    xt = _with_intercept(x)
    w0 = jnp.zeros(xt.shape[1], xt.dtype)

    def step(_, w):
        z = xt @ w
        gradient = w - c * xt.T @ (mask * y * jax.nn.sigmoid(-y * z))
        p = jax.nn.sigmoid(z)
        root = jnp.sqrt(c * mask * p * (1 - p))  # S^½ of the Hessian I + X̃ᵀ S X̃
        rx = root[:, None] * xt
        inner = jnp.eye(xt.shape[0], dtype=xt.dtype) + rx @ rx.T
        direction = gradient - rx.T @ jax.scipy.linalg.solve(inner, rx @ gradient, assume_a="pos")
        candidates = w[None, :] - jnp.asarray(_STEP_SIZES, w.dtype)[:, None] * direction[None, :]
        values = jax.vmap(logistic_objective, in_axes=(0, None, None, None, None))(candidates, x, y, mask, c)
        best = jnp.argmin(values)
        return jnp.where(values[best] <= logistic_objective(w, x, y, mask, c), candidates[best], w)

    return jax.lax.fori_loop(0, steps, step, w0)


def predict_positive(w: Float[Array, " D+1"], x: Float[Array, "n D"]) -> Float[Array, " n"]:
    """P(y = +1 | x) = σ(w·x + b)."""
    return jax.nn.sigmoid(_with_intercept(x) @ w)
