"""SentenceDebias (Liang et al. 2020, "Towards Debiasing Sentence Representations", §3); docs/methods.md §11.4.

The bias subspace is spanned by the top ``k`` principal directions of counterfactual tuples' states, each
tuple centred on its own mean (the sentence and its copies with the attribute words swapped, one per
class); the eraser projects it out: ``x' = x - (x V) Vᵀ`` (``mean`` 0, as the authors').
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxassoc.errors import InputError
from jaxassoc.mitigation.eraser import Eraser, check_states, projection


def fit_sentence_debias(states: Float[Array, "n m d"], k: int = 1) -> Eraser:
    """The SentenceDebias eraser from ``states`` (n tuples of m >= 2 counterfactual variants, d wide): the
    top ``k`` right singular vectors of the tuple-centred rows (a PCA: the centred rows have mean 0).
    InputError for another shape, non-finite states, or ``k`` outside 1..min(n (m - 1), d)."""
    a = np.asarray(states)
    if a.ndim != 3 or a.shape[1] < 2:
        raise InputError(f"fit_sentence_debias: states are (tuples, variants >= 2, d), got shape {a.shape}")
    check_states(a.reshape(-1, a.shape[-1]), "fit_sentence_debias states")
    n, m, d = a.shape
    if not 1 <= k <= min(n * (m - 1), d):
        raise InputError(f"fit_sentence_debias: k={k} directions from {n} tuples of {m} in {d} dimensions")
    return projection(_directions(jnp.asarray(a, jnp.float32), k))


@functools.partial(jax.jit, static_argnums=1)
def _directions(states, k):
    centred = (states - jnp.mean(states, axis=1, keepdims=True)).reshape(-1, states.shape[-1])
    _, _, vt = jnp.linalg.svd(centred, full_matrices=False)
    return vt[:k].T
