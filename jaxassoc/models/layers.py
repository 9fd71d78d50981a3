"""Small pieces shared by the transformer ports: norms, activations, attention, position ids.

The ports are plain ``jax.numpy`` functions over parameter pytrees rather than Flax linen modules: a
linen ``apply`` is exactly such a pure function, and writing it directly keeps the parameter tree equal
to what the metrics differentiate (``{"body": ..., "head": Head}``) with no module/variable plumbing.
Per-layer parameters are stacked on a leading axis and the blocks run under ``jax.lax.scan``, so a model
compiles one block whatever its depth.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterator, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ModelError


def layer_norm(x: Float[Array, "... D"], p: dict, eps: float) -> Float[Array, "... D"]:
    """LayerNorm (Ba et al. 2016) with ``p = {"scale", "bias"}``, computed in float32."""
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    var = jnp.square(x32 - mean).mean(-1, keepdims=True)
    y = (x32 - mean) * jax.lax.rsqrt(var + eps)
    return (y * p["scale"].astype(jnp.float32) + p["bias"].astype(jnp.float32)).astype(x.dtype)


def dense(x: Float[Array, "... I"], p: dict) -> Float[Array, "... O"]:
    """``x @ w + b`` with ``p = {"w": (in, out), "b": (out,)}``."""
    return x @ p["w"] + p["b"]


def gelu_tanh(x: Array) -> Array:
    """GPT-2's ``gelu_new``: the tanh approximation of GELU (Hendrycks & Gimpel 2016)."""
    return jax.nn.gelu(x, approximate=True)


def gelu_erf(x: Array) -> Array:
    """The exact (erf) GELU used by BERT and RoBERTa."""
    return jax.nn.gelu(x, approximate=False)


ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": gelu_erf,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": jax.nn.relu,
}


def check_activation(name: str, field: str) -> str:
    """Return ``name`` if it is a handled activation, else raise ModelError naming the config field."""
    if name not in ACTIVATIONS:
        raise ModelError(
            f"config field {field}={name!r} is not supported; supported activations: {sorted(ACTIVATIONS)}"
        )
    return name


@contextlib.contextmanager
def required_fields(family: str) -> Iterator[None]:
    """Turn a KeyError while reading a HF config into a ModelError naming the missing field."""
    try:
        yield
    except KeyError as e:
        raise ModelError(f"the {family} config.json lacks the required field {e.args[0]!r}") from None


def positions_from_mask(attention_mask: Int[Array, "B T"]) -> Int[Array, "B T"]:
    """Position of each real token counted from the start of its sequence (left or right padding).

    The mask is 0 for padding and otherwise a segment id: a plain 0/1 mask holds one sequence per row,
    and a *packed* row holds several contiguous sequences with distinct ids (e.g. ``1 1 1 2 2 0``), each
    counted from 0. Padding positions get the position of the nearest real token before them (0 before
    the first), so they never index past the position table.
    """
    real = attention_mask > 0
    count = jnp.cumsum(real, axis=1)  # real tokens up to and including t
    previous = jnp.pad(attention_mask[:, :-1], ((0, 0), (1, 0)))
    starts = real & (attention_mask != previous)  # first token of a segment
    before = jax.lax.cummax(jnp.where(starts, count - 1, 0), axis=1)  # real tokens before t's segment
    return jnp.maximum(count - 1 - before, 0)


def segment_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B T T"]:
    """Keys (last axis) a query (middle axis) may see, ignoring order: real keys of its own segment.

    A padding query sees every real key, so its (unused) output stays finite. For a 0/1 mask this is
    "every real key", the usual padding mask.
    """
    real_key = (attention_mask > 0)[:, None, :]
    same = attention_mask[:, :, None] == attention_mask[:, None, :]
    padding_query = (attention_mask == 0)[:, :, None]
    return real_key & (same | padding_query)


def attention(
    q: Float[Array, "B T H K"],
    k: Float[Array, "B T H K"],
    v: Float[Array, "B T H K"],
    allowed: Bool[Array, "B 1 T T"],
    scale: float,
) -> Float[Array, "B T H K"]:
    """Scaled dot-product attention (Vaswani et al. 2017, eq. 1); softmax in float32.

    Disallowed scores are set to the dtype's minimum (not -inf), as in HF, so a query row with no allowed
    key (a padding row) gives finite values instead of NaN.
    """
    scores = jnp.einsum("bqhk,bthk->bhqt", q, k).astype(jnp.float32) * scale
    scores = jnp.where(allowed, scores, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    return jnp.einsum("bhqt,bthk->bqhk", weights, v)


def split_heads(x: Float[Array, "B T D"], n_heads: int) -> Float[Array, "B T H K"]:
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads)


def merge_heads(x: Float[Array, "B T H K"]) -> Float[Array, "B T D"]:
    B, T, H, K = x.shape
    return x.reshape(B, T, H * K)


def head_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def padding_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B 1 1 T"]:
    """Keys a query may attend to in a bidirectional encoder: every real token."""
    return attention_mask.astype(bool)[:, None, None, :]


def causal_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B 1 T T"]:
    """Keys a query may attend to in a causal decoder: real tokens of its segment at or before it."""
    T = attention_mask.shape[1]
    causal = jnp.tril(jnp.ones((T, T), dtype=bool))
    return (causal[None] & segment_allowed(attention_mask))[:, None]


class KVCache(NamedTuple):
    """Keys and values of every layer for ``T`` columns: each ``(layers, B, T, key/value heads, head_dim)``."""

    k: Float[Array, "L B T H K"]
    v: Float[Array, "L B T H K"]


def write_columns(k_all: Array, v_all: Array, k: Array, v: Array, start) -> tuple[Array, Array]:
    """One layer's cached keys/values ``(B, T, H, K)`` with the new tokens' written at columns ``start...``."""
    k_all = jax.lax.dynamic_update_slice_in_dim(k_all, k.astype(k_all.dtype), start, axis=1)
    v_all = jax.lax.dynamic_update_slice_in_dim(v_all, v.astype(v_all.dtype), start, axis=1)
    return k_all, v_all
