"""INLP, iterative null-space projection (Ravfogel et al. 2020, "Null It Out", Alg. 1); docs/methods.md §11.3.

Repeat ``iterations`` times: train a linear classifier of the concept on the current states ``x P``, add its
weight vectors' span to the removed subspace, and project the states onto the complement of everything
removed so far. The result is the orthogonal projection onto the intersection of the classifiers' null
spaces (Ravfogel et al.'s ``P = I - P_{R_1 + ... + R_n}``), an :class:`Eraser` with ``mean`` 0 and
``down = up.T = B``, ``B`` an orthonormal basis of the removed directions (``iterations * c`` columns, zero
where a classifier added nothing).

The classifiers: ``logistic`` (softmax regression, the mean cross-entropy) or ``svm`` (one-vs-rest squared
hinge loss), each with ``l2 / 2 * ||W||²`` (biases free), fitted by optax's L-BFGS for ``steps`` steps, all
inside one jitted ``lax.scan``. The states are divided by their root-mean-square row norm first, so ``l2``
means the same at every site. ``min_accuracy``: the iteration whose classifier's accuracy on the fitting
rows is at or below it, and every later one, removes nothing (Ravfogel et al. stop near the majority rate).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float

from jaxassoc.errors import InputError
from jaxassoc.mitigation.eraser import Eraser, check_states, one_hot_labels

CLASSIFIERS = ("logistic", "svm")


def fit_inlp(
    x: Float[Array, "n d"],
    z: Array,
    *,
    iterations: int = 10,
    classifier: str = "logistic",
    l2: float = 1e-3,
    steps: int = 100,
    min_accuracy: float | None = None,
    with_accuracies: bool = False,
) -> Eraser | tuple[Eraser, Float[Array, " iterations"]]:
    """The INLP eraser of the concept ``z`` ((n,) classes or (n, k) one-hot) from ``x`` (n, d); with
    ``with_accuracies`` also each iteration's classifier accuracy on the fitting rows (before its projection;
    NaN after the stop). InputError for bad states or labels, an unknown classifier, options out of range."""
    if classifier not in CLASSIFIERS:
        raise InputError(f"fit_inlp: classifier={classifier!r}; choose one of {list(CLASSIFIERS)}")
    if iterations < 1 or steps < 1 or l2 <= 0:
        raise InputError(f"fit_inlp: iterations={iterations} and steps={steps} must be >= 1 and l2={l2} positive")
    if min_accuracy is not None and not 0 <= min_accuracy <= 1:
        raise InputError(f"fit_inlp: min_accuracy={min_accuracy} must be in [0, 1] (or None: every iteration)")
    a = check_states(x, "fit_inlp x")
    labels = one_hot_labels(z, a.shape[0], "fit_inlp z")
    stop = -1.0 if min_accuracy is None else float(min_accuracy)
    eraser, accuracies = _fit(jnp.asarray(a, jnp.float32), jnp.asarray(labels), iterations, classifier,
                              float(l2), steps, stop)  # fmt: skip
    return (eraser, accuracies) if with_accuracies else eraser


def classifier_loss(params: tuple, x: Array, y: Array, classifier: str, l2: float) -> Array:
    """The classifier's objective: mean loss over the rows + ``l2 / 2 * ||W||²``; ``params = (W (d, c), b (c,))``,
    ``y`` (n, c) one-hot."""
    w, b = params
    scores = x @ w + b
    if classifier == "logistic":
        loss = -jnp.mean(jnp.sum(y * jax.nn.log_softmax(scores, axis=-1), axis=-1))
    else:
        signs = 2 * y - 1
        loss = jnp.mean(jnp.sum(jnp.maximum(0.0, 1 - signs * scores) ** 2, axis=-1))
    return loss + l2 / 2 * jnp.sum(w * w)


def train_classifier(x: Array, y: Array, classifier: str, l2: float, steps: int) -> tuple[Array, Array]:
    """``(W, b)`` minimising :func:`classifier_loss` from zero by ``steps`` L-BFGS steps (optax, zoom line
    search)."""
    d, c = x.shape[1], y.shape[1]
    objective = functools.partial(classifier_loss, x=x, y=y, classifier=classifier, l2=l2)
    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)
    params = (jnp.zeros((d, c), x.dtype), jnp.zeros((c,), x.dtype))

    def step(_, carry):
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(params, updates), state

    params, _ = jax.lax.fori_loop(0, steps, step, (params, solver.init(params)))
    return params


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _fit(x, y, iterations, classifier, l2, steps, stop):
    n, d = x.shape
    c = y.shape[1]
    x = x / jnp.sqrt(jnp.mean(jnp.sum(x * x, axis=1)))
    truth = jnp.argmax(y, axis=1)

    def iteration(carry, i):
        basis, active = carry  # basis (d, iterations * c): the removed directions so far, orthonormal
        projected = x - (x @ basis) @ basis.T
        w, b = train_classifier(projected, y, classifier, l2, steps)
        if classifier == "logistic":  # softmax ignores a vector shared by every class: keep what separates them
            w = w - jnp.mean(w, axis=1, keepdims=True)
        accuracy = jnp.mean(jnp.argmax(projected @ w + b, axis=1) == truth)
        active = active & (accuracy > stop)
        new = _orthonormal_complement(w, basis) * active
        basis = jax.lax.dynamic_update_slice(basis, new, (0, i * c))
        return (basis, active), jnp.where(active, accuracy, jnp.nan)

    start = (jnp.zeros((d, iterations * c), x.dtype), jnp.array(True))
    (basis, _), accuracies = jax.lax.scan(iteration, start, jnp.arange(iterations))
    return Eraser(jnp.zeros((d,), x.dtype), basis, basis.T), accuracies


def _orthonormal_complement(w: Array, basis: Array) -> Array:
    """The columns of ``w`` made orthogonal to ``basis`` and to each other (Gram-Schmidt, twice for accuracy),
    unit length; a column with nothing left (below 1e-4 of its norm: float32 rounding) becomes zero."""
    columns = []
    for j in range(w.shape[1]):
        v = w[:, j]
        norm0 = jnp.linalg.norm(v)
        for _ in range(2):
            v = v - basis @ (basis.T @ v)
            for u in columns:
                v = v - u * (u @ v)
        norm = jnp.linalg.norm(v)
        keep = norm > 1e-4 * norm0
        columns.append(jnp.where(keep, v / jnp.where(keep, norm, 1.0), 0.0))
    return jnp.stack(columns, axis=1)
