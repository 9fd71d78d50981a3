"""Llama / Mistral decoder as Flax NNX modules (Touvron et al. 2023; Jiang et al. 2023).

A pre-norm Transformer decoder: RMSNorm (Zhang & Sennrich 2019), rotary position embeddings
(Su et al. 2021, eq. 34, in the "rotate half" layout of Hugging Face checkpoints; optionally rescaled,
``layers.rope_frequencies``: linear, dynamic NTK, Llama 3.1's ``llama3``), grouped-query
attention (Ainslie et al. 2023), SwiGLU feed-forward (Shazeer 2020) and, for Mistral, a sliding-window
causal mask. The module state is ``{"embed", "layers": {...}, "norm"}``, the layers stacked on a leading
axis and scanned, so a 30-layer model compiles one block.

Numerics follow ``transformers.models.llama.modeling_llama``: RMSNorm and softmax in float32, rotary
angles from float32 position ids, everything else in the parameters' dtype (fp32 by default; cast the
params to bf16 for bf16). Position ids come from the mask (``layers.positions_from_mask``), so a
left-padded row gets the same positions, hence the same states, as the unpadded sequence, and a mask of
segment ids runs several packed sequences in one row.
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
from jaxassoc.models.llama.config import LlamaConfig


class LlamaBlock(CausalBlock):
    """One decoder layer: ``x + Attn(RMSNorm(x))`` then ``x + SwiGLU(RMSNorm(x))``; projections ``(in, out)``
    (all layers' parameters stacked on a leading axis of size ``lead``), with query/key/value biases if
    ``config.qkv_bias`` (Qwen2)."""

    def __init__(self, config: LlamaConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F = c.hidden_size, c.intermediate_size
        q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
        self.attn_norm = zeros(*lead, D)
        self.q = zeros(*lead, D, q)
        self.k = zeros(*lead, D, kv)
        self.v = zeros(*lead, D, kv)
        if c.qkv_bias:
            self.q_bias = zeros(*lead, q)
            self.k_bias = zeros(*lead, kv)
            self.v_bias = zeros(*lead, kv)
        self.o = zeros(*lead, q, D)
        self.mlp_norm = zeros(*lead, D)
        self.gate = zeros(*lead, D, F)
        self.up = zeros(*lead, D, F)
        self.down = zeros(*lead, F, D)
        self.config = config

    def project(self, x, rope):
        """Queries ``(B, T, H, d)``, rotated keys and values ``(B, T, KV, d)`` of the layer's input; ``rope``
        is ``(cos, sin)`` of its tokens' positions (``Llama.block_positions``)."""
        c = self.config
        B, T, _ = x.shape
        H, KV, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        cos, sin = rope
        h = rms_norm(x, self.attn_norm[...], c.rms_norm_eps)
        q, k, v = h @ self.q[...], h @ self.k[...], h @ self.v[...]
        if c.qkv_bias:
            q, k, v = q + self.q_bias[...], k + self.k_bias[...], v + self.v_bias[...]
        q = apply_rope(q.reshape(B, T, H, d), cos, sin)
        k = apply_rope(k.reshape(B, T, KV, d), cos, sin)
        return q, k, v.reshape(B, T, KV, d)

    def attend(self, x, q, k, v, allowed, bias=None):
        """``x + Attn`` (queries of x's tokens over the given keys/values) then ``x + SwiGLU(RMSNorm(x))``."""
        c = self.config
        B, T, _ = x.shape
        attended = attention(q, k, v, allowed, head_scale(c.head_dim), bias=bias).reshape(B, T, -1)
        x = x + attended @ self.o[...]
        h = rms_norm(x, self.mlp_norm[...], c.rms_norm_eps)
        return x + (jax.nn.silu(h @ self.gate[...]) * (h @ self.up[...])) @ self.down[...]


class Llama(RotaryBody):
    """The Llama / Mistral / Qwen2 / Phi-3 body (``layers.RotaryBody`` with Llama blocks)."""

    block = LlamaBlock


def new_body(config: LlamaConfig, body: Mapping | None = None) -> Llama:
    """The Llama / Mistral body module (zero parameters); every such body has the same structure."""
    return Llama(config)
