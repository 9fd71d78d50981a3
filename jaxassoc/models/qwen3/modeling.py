"""Qwen3 decoder as Flax NNX modules (Qwen Team 2025, "Qwen3 Technical Report").

Llama's pre-norm decoder (RMSNorm, rotary embeddings in the "rotate half" layout, grouped-query attention,
SwiGLU feed-forward) with two differences: each query and key head is RMS-normalised over its head
dimension (``q_norm``, ``k_norm``, one weight vector shared by the heads) before the rotation, and the head
dimension is a free hyper-parameter (Qwen3-0.6B: 16 heads of 128 in a 1024-wide model). Layers marked
``sliding_attention`` attend within a window on position ids (off in the released checkpoints).

Numerics follow ``transformers.models.qwen3.modeling_qwen3``: every RMSNorm and the softmax in float32,
everything else in the parameters' dtype. The module state is ``{"embed", "layers": {...}, "norm"}``.
"""

from __future__ import annotations

from typing import Mapping

import jax

from jaxassoc.models.layers import (
    CausalBlock,
    RotaryBody,
    apply_rope,
    attention,
    head_scale,
    rms_norm,
    zeros,
)
from jaxassoc.models.qwen3.config import Qwen3Config


class Qwen3Block(CausalBlock):
    """One decoder layer: ``x + Attn(RMSNorm(x))`` (queries and keys head-normalised) then
    ``x + SwiGLU(RMSNorm(x))``; projections ``(in, out)``, all layers stacked on a leading axis ``lead``."""

    def __init__(self, config: Qwen3Config, *, lead: tuple[int, ...] = ()):
        c = config
        D, F, d = c.hidden_size, c.intermediate_size, c.head_dim
        q, kv = c.num_attention_heads * d, c.num_key_value_heads * d
        self.attn_norm = zeros(*lead, D)
        self.q = zeros(*lead, D, q)
        self.k = zeros(*lead, D, kv)
        self.v = zeros(*lead, D, kv)
        self.q_norm = zeros(*lead, d)
        self.k_norm = zeros(*lead, d)
        self.o = zeros(*lead, q, D)
        self.mlp_norm = zeros(*lead, D)
        self.gate = zeros(*lead, D, F)
        self.up = zeros(*lead, D, F)
        self.down = zeros(*lead, F, D)
        self.config = config

    def project(self, x, rope):
        """Queries ``(B, T, H, d)`` and keys ``(B, T, KV, d)``, each head RMS-normalised then rotated, and
        values; ``rope`` is ``(cos, sin)`` of the tokens' positions."""
        c = self.config
        B, T, _ = x.shape
        H, KV, d, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
        cos, sin = rope
        h = rms_norm(x, self.attn_norm[...], eps)
        q = apply_rope(rms_norm((h @ self.q[...]).reshape(B, T, H, d), self.q_norm[...], eps), cos, sin)
        k = apply_rope(rms_norm((h @ self.k[...]).reshape(B, T, KV, d), self.k_norm[...], eps), cos, sin)
        return q, k, (h @ self.v[...]).reshape(B, T, KV, d)

    def attend(self, x, q, k, v, allowed, bias=None):
        """``x + Attn`` (queries of x's tokens over the given keys/values) then ``x + SwiGLU(RMSNorm(x))``."""
        c = self.config
        B, T, _ = x.shape
        attended = attention(q, k, v, allowed, head_scale(c.head_dim), bias=bias).reshape(B, T, -1)
        x = x + attended @ self.o[...]
        h = rms_norm(x, self.mlp_norm[...], c.rms_norm_eps)
        return x + (jax.nn.silu(h @ self.gate[...]) * (h @ self.up[...])) @ self.down[...]


class Qwen3(RotaryBody):
    """The Qwen3 body (``layers.RotaryBody`` with Qwen3 blocks: q/k norms)."""

    block = Qwen3Block


def new_body(config: Qwen3Config, body: Mapping | None = None) -> Qwen3:
    """The Qwen3 body module (zero parameters); every such body has the same structure."""
    return Qwen3(config)
