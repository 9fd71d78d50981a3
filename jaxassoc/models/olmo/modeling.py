"""OLMo (Groeneveld et al. 2024, "OLMo: Accelerating the Science of Language Models") as Flax NNX modules,
in the layout of the ``allenai/OLMo-*-hf`` checkpoints (``transformers.models.olmo.modeling_olmo``).

Llama's decoder (rotary embeddings in the "rotate half" layout, grouped-query attention, SwiGLU, no biases)
with a NON-parametric LayerNorm (no scale, no bias, eps 1e-5, in float32) where Llama has RMSNorm, and the
query/key/value projections clamped to ``±clip_qkv`` (before the rotation) when the config sets it. The
module state is ``{"embed", "layers": {...}}``, the layers stacked on a leading axis.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.layers import (
    CausalBlock,
    CausalBody,
    apply_rope,
    attention,
    head_scale,
    layer_norm,
    rope_tables,
    zeros,
)
from jaxassoc.models.olmo.config import NORM_EPS, OlmoConfig


class OlmoBlock(CausalBlock):
    """One decoder layer: ``x + Attn(LayerNorm(x))`` then ``x + SwiGLU(LayerNorm(x))``; projections ``(in, out)``
    (all layers' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: OlmoConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F = c.hidden_size, c.intermediate_size
        q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
        self.q = zeros(*lead, D, q)
        self.k = zeros(*lead, D, kv)
        self.v = zeros(*lead, D, kv)
        self.o = zeros(*lead, q, D)
        self.gate = zeros(*lead, D, F)
        self.up = zeros(*lead, D, F)
        self.down = zeros(*lead, F, D)
        self.config = config

    def project(self, x, rope):
        """Rotated queries ``(B, T, H, d)`` and keys, values ``(B, T, KV, d)``, each clipped first if configured."""
        c = self.config
        B, T, _ = x.shape
        H, KV, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        h = layer_norm(x, NORM_EPS)
        q, k, v = (h @ w[...] for w in (self.q, self.k, self.v))
        if c.clip_qkv is not None:
            q, k, v = (jnp.clip(a, -c.clip_qkv, c.clip_qkv) for a in (q, k, v))
        cos, sin = rope
        return (
            apply_rope(q.reshape(B, T, H, d), cos, sin),
            apply_rope(k.reshape(B, T, KV, d), cos, sin),
            v.reshape(B, T, KV, d),
        )

    def attend(self, x, q, k, v, allowed, bias=None):
        """``x + Attn`` (queries of x's tokens over the given keys/values) then ``x + SwiGLU(LayerNorm(x))``."""
        B, T, _ = x.shape
        attended = attention(q, k, v, allowed, head_scale(self.config.head_dim), bias=bias).reshape(B, T, -1)
        x = x + attended @ self.o[...]
        h = layer_norm(x, NORM_EPS)
        return x + (jax.nn.silu(h @ self.gate[...]) * (h @ self.up[...])) @ self.down[...]


class Olmo(CausalBody):
    """The OLMo body: token embeddings, the stacked layers, the final non-parametric LayerNorm."""

    def __init__(self, config: OlmoConfig):
        c = config
        self.embed = zeros(c.vocab_size, c.hidden_size)
        self.layers = OlmoBlock(config, lead=(c.num_hidden_layers,))
        self.config = config

    @property
    def stack(self) -> OlmoBlock:
        return self.layers

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.num_hidden_layers, c.num_key_value_heads, c.head_dim

    def embed_inputs(self, input_ids, positions):
        return jnp.take(self.embed[...], input_ids, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return layer_norm(h, NORM_EPS)

    def block_positions(self, positions, dtype):
        return rope_tables(positions, self.config.head_dim, self.config.rope_theta, dtype)


def new_body(config: OlmoConfig, body: Mapping | None = None) -> Olmo:
    """The OLMo body module (zero parameters); every OLMo body has the same structure."""
    return Olmo(config)
