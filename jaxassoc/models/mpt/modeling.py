"""MPT (MosaicML 2023, "MPT-7B") as Flax NNX modules.

A pre-LN decoder without biases: LayerNorm with a scale only, a fused ``Wqkv`` projection (optionally clipped
to ``±clip_qkv``), no position embeddings but ALiBi (Press et al. 2022, "Train Short, Test Long", sec. 3): each
head adds ``slope_h * (key position - query position)`` to its scaled scores, with MPT's slopes
``2^(-i * alibi_bias_max / n)`` (n the head count rounded up to a power of two, interleaved when it is not one,
as ``transformers.models.mpt.modeling_mpt.build_mpt_alibi_tensor``), a GELU (erf) MLP, the head tied to the
word embeddings. The bias is computed from position ids (``CausalBody.attention_bias``), so left padding,
packed rows and cached steps see the same bias as the sequence alone. It is ``slope_h * (key position -
the row's last position)``, one ``(H, T)`` array per row: it differs from ``slope_h * (key position - query
position)`` by a constant per query, which the softmax ignores, and like transformers' ``slope_h * (key
column - last column)`` it stays within ``[-slope_h * T, 0]``.
"""

from __future__ import annotations

import math
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxassoc.models.layers import (
    CausalBlock,
    CausalBody,
    attention,
    layer_norm,
    merge_heads,
    split_heads,
    zeros,
)
from jaxassoc.models.mpt.config import MptConfig


def alibi_slopes(n_heads: int, bias_max: int) -> np.ndarray:
    """The per-head ALiBi slopes ``(n_heads,)`` of MPT (float32, in transformers' order)."""
    n = 2 ** math.ceil(math.log2(n_heads))
    slopes = 1.0 / np.power(np.float32(2), np.arange(1, n + 1, dtype=np.float32) * np.float32(bias_max / n))
    if n != n_heads:
        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.astype(np.float32)


class MptBlock(CausalBlock):
    """One MPT block (all layers' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: MptConfig, *, lead: tuple[int, ...] = ()):
        D, F = config.d_model, config.expansion_ratio * config.d_model
        self.norm_1 = zeros(*lead, D)
        self.wqkv = zeros(*lead, D, 3 * D)
        self.out = zeros(*lead, D, D)
        self.norm_2 = zeros(*lead, D)
        self.up = zeros(*lead, D, F)
        self.down = zeros(*lead, F, D)
        self.config = config

    def project(self, h, positions):
        """Queries, keys and values ``(B, T, H, K)`` (ALiBi enters as the attention bias)."""
        c = self.config
        qkv = layer_norm(h, c.layer_norm_epsilon, self.norm_1[...]) @ self.wqkv[...]
        if c.clip_qkv is not None:
            qkv = jnp.clip(qkv, -c.clip_qkv, c.clip_qkv)
        return tuple(split_heads(a, c.n_heads) for a in jnp.split(qkv, 3, axis=-1))

    def attend(self, h, q, k, v, allowed, bias=None):
        """``h + Attn`` (with the ALiBi ``bias``) then ``h + MLP(LayerNorm(h))``."""
        c = self.config
        h = h + merge_heads(attention(q, k, v, allowed, c.softmax_scale, bias=bias)) @ self.out[...]
        x = layer_norm(h, c.layer_norm_epsilon, self.norm_2[...])
        return h + jax.nn.gelu(x @ self.up[...], approximate=False) @ self.down[...]


class Mpt(CausalBody):
    """The MPT body: word embeddings, the stacked blocks, the final LayerNorm; ALiBi from position ids."""

    def __init__(self, config: MptConfig):
        c = config
        self.wte = zeros(c.vocab_size, c.d_model)
        self.blocks = MptBlock(config, lead=(c.n_layers,))
        self.norm_f = zeros(c.d_model)
        self.config = config

    @property
    def stack(self) -> MptBlock:
        return self.blocks

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.n_layers, c.n_heads, c.head_dim

    def embed_inputs(self, input_ids, positions):
        return jnp.take(self.wte[...], input_ids, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return layer_norm(h, self.config.layer_norm_epsilon, self.norm_f[...])

    def attention_bias(self, query_positions, key_positions):
        """``slope_h * (key position - the row's last key position)``, ``(B, H, 1, T)``: ALiBi on position ids,
        shifted per row by a constant (the softmax ignores it) to transformers' range of values."""
        slopes = jnp.asarray(alibi_slopes(self.config.n_heads, self.config.alibi_bias_max))
        distance = (key_positions - key_positions.max(axis=1, keepdims=True)).astype(jnp.float32)
        return slopes[None, :, None, None] * distance[:, None, None, :]


def new_body(config: MptConfig, body: Mapping | None = None) -> Mpt:
    """The MPT body module (zero parameters); every MPT body has the same structure."""
    return Mpt(config)
