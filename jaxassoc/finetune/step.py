"""The training step: one pure function of the adapters, the optimiser state and a batch, jitted once per
objective and optimiser (docs/methods.md §13.3).

An objective's loss is ``sum_i w_i * mean_i + f(whole)``: token terms (next-token or masked-token loss on
counterfactual text, the preservation term on held text) are means over tokens, so gradient accumulation over
micro batches is exact: each micro batch adds ``w_i * sum_i(micro) / count_i(step)``, the counts (tokens of the
whole step, from the masks) known before any gradient; a bias term ``f`` (the square of a metric's score) is
not a mean over tokens, so it is computed once per step on its item batch. The step returns the new state and
the value of every term.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Int


class TrainState(NamedTuple):
    """What training carries from step to step: the step count, the adapters' trained arrays (float32 master
    copies) and the optimiser's state."""

    step: Int[Array, ""]
    params: Any
    opt_state: Any


def init_state(params: Any, optimizer: optax.GradientTransformation) -> TrainState:
    """Step 0 of ``params`` (float32) under ``optimizer``."""
    params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), params)
    return TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params))


@functools.partial(jax.jit, static_argnames=("objective", "optimizer"), donate_argnums=(0,))
def train_step(state: TrainState, frozen: Any, batch: Any, *, objective: Any, optimizer: Any):
    """One optimiser step: ``(new state, {term: value, ..., "loss", "grad_norm"})``.

    ``frozen``: the base model's parameters (never updated, never copied); ``batch``: ``{"micro": a pytree whose
    leaves have a leading micro-batch axis, "whole": a pytree or None}``; ``objective``: hashable, with
    ``counts(micro)``, ``micro_terms(params, frozen, micro_batch, counts) -> {term: its share of the step's
    mean}``, ``weights`` (term -> weight in the loss), ``whole_terms(params, frozen, whole) -> {term: value}``
    and ``whole_loss(values)`` (:class:`~jaxassoc.finetune.objectives.Objective`); ``optimizer``: a hashable
    :class:`~jaxassoc.finetune.optim.OptimizerConfig`."""
    counts = objective.counts(batch["micro"])

    def micro_loss(params, micro):
        terms = objective.micro_terms(params, frozen, micro, counts)
        return sum(objective.weights[k] * v for k, v in terms.items()), terms

    def accumulate(carry, micro):
        grads, terms = carry
        (_, part), g = jax.value_and_grad(micro_loss, has_aux=True)(state.params, micro)
        return (jax.tree.map(jnp.add, grads, g), jax.tree.map(jnp.add, terms, part)), None

    grads, terms, loss = jax.tree.map(jnp.zeros_like, state.params), {}, jnp.zeros((), jnp.float32)
    if counts:  # no token term (a metric objective with lam = 0): no pass over the micro batches
        first = jax.tree.map(lambda x: x[0], batch["micro"])
        shapes = jax.eval_shape(lambda: micro_loss(state.params, first)[1])
        start = (grads, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes))
        (grads, terms), _ = jax.lax.scan(accumulate, start, batch["micro"])
        loss = sum(objective.weights[k] * v for k, v in terms.items())
    if batch.get("whole") is not None:

        def whole_loss(params):
            values = objective.whole_terms(params, frozen, batch["whole"])
            return objective.whole_loss(values), values

        (part, values), g = jax.value_and_grad(whole_loss, has_aux=True)(state.params)
        grads, terms, loss = jax.tree.map(jnp.add, grads, g), {**terms, **values}, loss + part
    updates, opt_state = optimizer.build().update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    return TrainState(state.step + 1, params, opt_state), {**terms, "loss": loss, "grad_norm": optax.global_norm(grads)}
