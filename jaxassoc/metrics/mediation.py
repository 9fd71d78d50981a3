"""Causal mediation analysis of gender bias (Vig et al. 2020, §2–3; docs/methods.md §10): total, natural
indirect and natural direct effects from the pronoun log-odds of the runs.

For an example ``u`` (a template filled with a profession), ``y(u) = p(anti-stereotypical pronoun) /
p(stereotypical pronoun)`` of the next token, and ``lo = log y``. With the set-gender intervention (the
profession replaced by the anti-stereotypical gender's word) and a component ``z`` (a head, a neuron):

- total effect ``TE = E_u[ y_set-gender(u) / y_null(u) − 1 ]`` (Vig et al. eq. 3 as a relative change);
- natural indirect effect ``NIE(z) = E_u[ y_null, z←z_set-gender(u)(u) / y_null(u) − 1 ]``: the original
  sentence with only ``z`` taking its set-gender value;
- natural direct effect ``NDE(z) = E_u[ y_set-gender, z←z_null(u)(u) / y_null(u) − 1 ]``: the set-gender
  sentence with ``z`` held at its original value.

Each is a mean over examples of ``exp(lo_intervened − lo_null) − 1`` (``expm1``: exact near 0).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


@jax.jit
def relative_change(lo_intervened: Float[Array, "n ..."], lo_null: Float[Array, " n"]) -> Float[Array, "n ..."]:
    """``y_intervened / y_null − 1`` per example (and per component along trailing axes) from log-odds."""
    lo_null = lo_null.reshape(lo_null.shape + (1,) * (lo_intervened.ndim - 1))
    return jnp.expm1(lo_intervened - lo_null)


@jax.jit
def mean_effect(lo_intervened: Float[Array, "n ..."], lo_null: Float[Array, " n"]) -> Float[Array, "..."]:
    """The effect: :func:`relative_change` averaged over the ``n`` examples (TE, NIE or NDE by which runs
    ``lo_intervened`` comes from)."""
    return relative_change(lo_intervened, lo_null).mean(axis=0)


__all__ = ["mean_effect", "relative_change"]
