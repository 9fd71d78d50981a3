"""Continuations of a shared prefix, scored over its keys and values at the cost of their own tokens.

Row b holds a prefix (a prompt, left- or right-padded as its mask says) in its first P columns and, in the
L columns after them, several continuations packed end to end. A continuation of k >= 2 tokens
w_1 … w_k contributes its inputs w_1 … w_{k-1} (one segment id per continuation, from 1; 0 is padding)
and its targets w_2 … w_k; the scorer reads log P(w_{j+1} | prefix, w_1 … w_j) at each input. w_1 itself
is predicted by the prefix's last state, which is returned too.

Prefix and packed columns run in one pass (``Decoder.forward_cached`` over all P + L columns from column 0,
with explicit position ids and attention mask). The prefix attends causally to itself only. Packed token
j of a continuation gets position id ``n_b + j - 1`` (n_b: the prefix's real tokens) and attends to the
prefix's real columns plus its own continuation's earlier tokens and itself (a block-causal mask), so every
continuation sees exactly what a full forward pass over ``prefix + w`` would show it, while the prefix's
keys and values are computed once and never copied per continuation. One pass instead of a prefix pass
then a continuation pass over a cache: the weights are read once and the matmuls have B x (P + L) rows
(RPAM TP2 on SmolLM2: 93 s -> 80 s, ``benchmarks/bench_rpam.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import InputError
from jaxassoc.models.base import Decoder, Head
from jaxassoc.models.heads import gather_positions, head_logits, last_positions
from jaxassoc.models.masks import causal_allowed, positions_from_mask


def pack_continuations(
    continuations: Sequence[Sequence[int]], length: int
) -> tuple[Int[np.ndarray, " L"], Int[np.ndarray, " L"], Int[np.ndarray, " L"]]:
    """``(inputs, targets, segments)`` of continuations (token ids, each >= 2 tokens) packed end to end into
    ``length`` columns; continuation i (from 0) has segment id i + 1, the padding after them 0."""
    inputs, targets, segments = (np.zeros(length, dtype=np.int32) for _ in range(3))
    at = 0
    for i, tokens in enumerate(continuations):
        k = len(tokens)
        if k < 2:
            raise InputError(f"continuation {i} has {k} token(s): only continuations of at least 2 tokens are packed")
        if at + k - 1 > length:
            raise InputError(f"continuations need more than the {length} packed columns: pack fewer per row")
        inputs[at : at + k - 1], targets[at : at + k - 1], segments[at : at + k - 1] = tokens[:-1], tokens[1:], i + 1
        at += k - 1
    return inputs, targets, segments


def packed_positions(prefix_mask: Int[Array, "B P"], segments: Int[Array, "B L"]) -> Int[Array, "B L"]:
    """Position id of each packed token: the prefix's real-token count plus its index in its continuation.
    Padding columns get the first continuation position: however many padding columns a row has, no
    position passes the context (a learned position table read past its end gives NaN, which would reach
    the real tokens through their zero attention weights)."""
    L = segments.shape[1]
    column = jnp.arange(L)[None, :]
    previous = jnp.pad(segments[:, :-1], ((0, 0), (1, 0)))
    starts = (segments != previous) | (column == 0)
    first = jax.lax.cummax(jnp.where(starts, column, 0), axis=1)  # first column of each token's segment
    prefix = jnp.sum(prefix_mask > 0, axis=1, keepdims=True)
    return prefix + jnp.where(segments > 0, column - first, 0)


def packed_allowed(prefix_mask: Int[Array, "B P"], segments: Int[Array, "B L"]) -> Bool[Array, "B 1 L P+L"]:
    """Cache columns each packed token attends to: the prefix's real tokens, then the earlier tokens of its
    own continuation and itself (padding tokens see the prefix only, so their outputs stay finite)."""
    L = segments.shape[1]
    prefix = jnp.broadcast_to((prefix_mask > 0)[:, None, :], (segments.shape[0], L, prefix_mask.shape[1]))
    causal = jnp.tril(jnp.ones((L, L), dtype=bool))[None]
    own = causal & (segments[:, :, None] == segments[:, None, :]) & (segments > 0)[:, None, :]
    return jnp.concatenate([prefix, own], axis=2)[:, None]


def target_logprobs(head: Head, hidden: Float[Array, "B L D"], targets: Int[Array, "B L"]) -> Float[Array, "B L"]:
    """log P_V(target) at every position (full-vocabulary log-softmax, float32), over groups of rows of
    about 128 positions so each group's logits stay small."""
    B, L = targets.shape
    group = max((g for g in range(1, B + 1) if B % g == 0 and g * L <= 128), default=1)

    def rows(args):
        h, ids = args
        logits = head_logits(head, h).astype(jnp.float32)
        picked = jnp.take_along_axis(logits, ids[..., None], axis=-1)[..., 0]
        return picked - jax.nn.logsumexp(logits, axis=-1)

    grouped = (hidden.reshape(B // group, group, L, -1), targets.reshape(B // group, group, L))
    return jax.lax.map(rows, grouped).reshape(B, L)


def prefix_and_continuations(
    params: dict,
    prefix_ids: Int[Array, "B P"],
    prefix_mask: Int[Array, "B P"],
    inputs: Int[Array, "B L"],
    targets: Int[Array, "B L"],
    segments: Int[Array, "B L"],
    *,
    decoder: Decoder,
) -> tuple[Float[Array, "B D"], Float[Array, "B L"]]:
    """The head input at each prefix's last real token, and log P_V(targets) of the packed continuations
    (0 at padding columns, ``segments == 0``); see the module docstring. ``L = 0`` runs the prefix only.

    Shapes are static: jit this (``decoder`` static) and bucket P and L for one compilation per shape.
    """
    B, P = prefix_ids.shape
    L = inputs.shape[1]
    body = params["body"]
    cache = decoder.init_cache(B, P + L, params["head"].W.dtype)  # one pass fills it whole: never read back
    if L == 0:
        hidden, _ = decoder.forward_cached(body, prefix_ids, prefix_mask, cache, 0)
        return gather_positions(hidden, last_positions(prefix_mask)), jnp.zeros((B, 0), jnp.float32)
    ids = jnp.concatenate([prefix_ids, inputs], axis=1)
    mask = jnp.concatenate([prefix_mask, jnp.ones((B, L), prefix_mask.dtype)], axis=1)
    positions = jnp.concatenate([positions_from_mask(prefix_mask), packed_positions(prefix_mask, segments)], axis=1)
    prefix_rows = jnp.concatenate([causal_allowed(prefix_mask), jnp.zeros((B, 1, P, L), bool)], axis=3)
    allowed = jnp.concatenate([prefix_rows, packed_allowed(prefix_mask, segments)], axis=2)
    hidden, _ = decoder.forward_cached(body, ids, mask, cache, 0, positions=positions, allowed=allowed)
    last = gather_positions(hidden[:, :P], last_positions(prefix_mask))
    return last, jnp.where(segments > 0, target_logprobs(params["head"], hidden[:, P:], targets), 0.0)
