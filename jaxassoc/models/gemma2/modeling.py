"""Gemma 2 decoder as Flax NNX modules (Gemma Team 2024, "Gemma 2").

A Transformer decoder with embeddings scaled by sqrt(d_model), (1 + w) RMSNorm before and after both the
attention and the feed-forward sublayer, rotary position embeddings (Su et al. 2021) in HF's "rotate half"
layout, grouped-query attention with scale ``query_pre_attn_scalar^-1/2`` and scores soft-capped
``c tanh(s / c)`` (``attn_logit_softcapping``), GeGLU feed-forward, and local (sliding-window) layers
alternating with global ones (``local_layers``). The final logit soft-cap is the head's (``Head.softcap``).

Numerics follow ``transformers.models.gemma2.modeling_gemma2``: the norms in float32 (normalised x times
``1 + w`` in float32, then cast), the embedding scale cast to the parameters' dtype, softmax in float32.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.gemma2.config import Gemma2Config
from jaxassoc.models.layers import ACTIVATIONS, CausalBlock, CausalBody, apply_rope, attention, rope_tables, zeros


def gemma_rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    """Gemma's RMSNorm: ``x / rms(x) * (1 + w)``, all in float32, cast back to x's dtype."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (normed * (1.0 + weight.astype(jnp.float32))).astype(x.dtype)


class Gemma2Block(CausalBlock):
    """One decoder layer: ``x + norm(Attn(norm(x)))`` then ``x + norm(GeGLU(norm(x)))``; projections
    ``(in, out)``, all layers' parameters stacked on a leading axis of size ``lead``."""

    def __init__(self, config: Gemma2Config, *, lead: tuple[int, ...] = ()):
        c = config
        D, F = c.hidden_size, c.intermediate_size
        q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
        self.attn_norm = zeros(*lead, D)
        self.q = zeros(*lead, D, q)
        self.k = zeros(*lead, D, kv)
        self.v = zeros(*lead, D, kv)
        self.o = zeros(*lead, q, D)
        self.post_attn_norm = zeros(*lead, D)
        self.mlp_norm = zeros(*lead, D)
        self.gate = zeros(*lead, D, F)
        self.up = zeros(*lead, D, F)
        self.down = zeros(*lead, F, D)
        self.post_mlp_norm = zeros(*lead, D)
        self.config = config

    def normalize_qk(self, q: jax.Array, k: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Queries and keys before the rotation (Gemma 3 normalises them here); Gemma 2: unchanged."""
        return q, k

    def project(self, x, rope):
        """Queries ``(B, T, H, d)``, rotated keys and values ``(B, T, KV, d)``; ``rope`` is ``(cos, sin)``."""
        c = self.config
        B, T, _ = x.shape
        H, KV, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        cos, sin = rope
        h = gemma_rms_norm(x, self.attn_norm[...], c.rms_norm_eps)
        q, k = self.normalize_qk((h @ self.q[...]).reshape(B, T, H, d), (h @ self.k[...]).reshape(B, T, KV, d))
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), (h @ self.v[...]).reshape(B, T, KV, d)

    def attend(self, x, q, k, v, allowed, bias=None):
        c = self.config
        B, T, _ = x.shape
        scale = c.query_pre_attn_scalar**-0.5
        attended = attention(q, k, v, allowed, scale, bias=bias, softcap=c.attn_logit_softcapping).reshape(B, T, -1)
        x = x + gemma_rms_norm(attended @ self.o[...], self.post_attn_norm[...], c.rms_norm_eps)
        h = gemma_rms_norm(x, self.mlp_norm[...], c.rms_norm_eps)
        mlp = (ACTIVATIONS[c.hidden_activation](h @ self.gate[...]) * (h @ self.up[...])) @ self.down[...]
        return x + gemma_rms_norm(mlp, self.post_mlp_norm[...], c.rms_norm_eps)


class Gemma2(CausalBody):
    """The Gemma 2 body: scaled token embeddings, the stacked layers (local ones windowed), the final norm."""

    block = Gemma2Block

    def __init__(self, config: Gemma2Config):
        c = config
        self.embed = zeros(c.vocab_size, c.hidden_size)
        self.layers = self.block(config, lead=(c.num_hidden_layers,))
        self.norm = zeros(c.hidden_size)
        self.window = c.sliding_window
        self.local_layers = c.local_layers
        self.config = config

    @property
    def stack(self) -> Gemma2Block:
        return self.layers

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.num_hidden_layers, c.num_key_value_heads, c.head_dim

    def embed_inputs(self, input_ids, positions):
        embedded = self.embed[...][input_ids]
        return embedded * jnp.asarray(math.sqrt(self.config.hidden_size), embedded.dtype)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return gemma_rms_norm(h, self.norm[...], self.config.rms_norm_eps)

    def block_positions(self, positions, dtype) -> Any:
        return rope_tables(positions, self.config.head_dim, self.config.rope_theta, dtype)


def new_body(config: Gemma2Config, body: Mapping | None = None) -> Gemma2:
    """The Gemma 2 body module (zero parameters); every such body has the same structure."""
    return Gemma2(config)
