"""Position ids and attention masks from a batch's attention mask: ``allowed[b, 0, t, s]`` arrays for
padding, causal, packed-segment and sliding-window attention (every mask the ports use is one)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int


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


def padding_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B 1 1 T"]:
    """Keys a query may attend to in a bidirectional encoder: every real token."""
    return attention_mask.astype(bool)[:, None, None, :]


def causal_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B 1 T T"]:
    """Keys a query may attend to in a causal decoder: real tokens of its segment at or before it (a sliding
    window is applied on position ids by :func:`window_allowed`)."""
    T = attention_mask.shape[1]
    allowed = jnp.arange(T)[None, :] <= jnp.arange(T)[:, None]
    return (allowed[None] & segment_allowed(attention_mask))[:, None]


def window_allowed(
    allowed: Bool[Array, "B 1 t T"], query_positions: Int[Array, "B t"], key_positions: Int[Array, "B T"], window: int
) -> Bool[Array, "B 1 t T"]:
    """``allowed`` restricted to a sliding window on position ids: a query sees itself and the ``window - 1``
    positions before it (Mistral; the local layers of GPT-Neo, Gemma 2/3, Qwen2)."""
    return allowed & (key_positions[:, None, None, :] > query_positions[:, None, :, None] - window)
