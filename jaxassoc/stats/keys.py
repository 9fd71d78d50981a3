"""The PRNG key every random draw takes: one typed key, or the older raw key of the same seed.

``jax.random.key(seed)`` and ``jax.random.PRNGKey(seed)`` (its raw uint32 data) draw the same numbers
once wrapped, so every test and bootstrap accepts both and gives the same result for the same seed;
anything else is refused naming the argument, before JAX meets it inside a compiled kernel.
"""

from __future__ import annotations

import jax
import numpy as np
from jaxtyping import PRNGKeyArray

from jaxassoc.errors import InputError

_EXPECTED = "one PRNG key, jax.random.key(seed) (or the older jax.random.PRNGKey(seed))"


def check_key(what: str, key) -> PRNGKeyArray:
    """``key`` as one typed key (a raw ``PRNGKey`` wrapped); InputError naming ``what`` for anything else."""
    dtype, shape = getattr(key, "dtype", None), getattr(key, "shape", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if shape == ():
            return key
        raise InputError(f"{what}: key must be {_EXPECTED}; got a batch of keys of shape {shape} (jax.vmap over them)")
    if dtype == np.uint32 and shape is not None and len(shape) == 1:
        try:
            return jax.random.wrap_key_data(key)
        except TypeError:  # the wrong number of words for the PRNG implementation
            pass
    got = f"an array of shape {tuple(shape)} and dtype {dtype}" if shape is not None else repr(key)
    raise InputError(f"{what}: key must be {_EXPECTED}; got {got}")
