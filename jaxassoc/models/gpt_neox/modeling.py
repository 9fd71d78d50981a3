"""GPT-NeoX / Pythia (Black et al. 2022; Biderman et al. 2023) as Flax NNX modules.

A pre-LayerNorm decoder with rotary position embeddings on the first ``rotary_dim`` dimensions of each
head only (Su et al. 2021, eq. 34, "rotate half" within them; the rest pass unchanged), a fused
``query_key_value`` projection whose output is laid out per head (``[q_h, k_h, v_h]`` for each head h,
as transformers' ``view(..., heads, 3 * head_dim)``), biases everywhere, and either the parallel residual
``x + attn(ln1(x)) + mlp(ln2(x))`` (``use_parallel_residual``, Pythia) or the sequential one. The module
state is ``{"embed_in", "layers": {...}, "final_layer_norm"}``, the layers stacked on a leading axis and
scanned. Numerics follow ``transformers.models.gpt_neox.modeling_gpt_neox``: LayerNorm and softmax in
float32, rotary tables from float32 positions, the rest in the parameters' dtype.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.gpt_neox.config import GPTNeoXConfig
from jaxassoc.models.layers import (
    ACTIVATIONS,
    CausalBlock,
    CausalBody,
    Dense,
    LayerNorm,
    apply_rope,
    attention,
    head_scale,
    merge_heads,
    rope_tables,
    zeros,
)


def partial_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate the first ``cos.shape[-1]`` dimensions of each head ("rotate half" layout); keep the rest."""
    d = cos.shape[-1]
    return jnp.concatenate([apply_rope(x[..., :d], cos, sin), x[..., d:]], axis=-1)


class GPTNeoXBlock(CausalBlock):
    """One GPT-NeoX layer (all layers' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: GPTNeoXConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F, eps = c.hidden_size, c.intermediate_size, c.layer_norm_eps
        self.input_layernorm = LayerNorm(D, eps, lead=lead)
        self.query_key_value = Dense(D, 3 * D, lead=lead)
        self.dense = Dense(D, D, lead=lead)
        self.post_attention_layernorm = LayerNorm(D, eps, lead=lead)
        self.dense_h_to_4h = Dense(D, F, lead=lead)
        self.dense_4h_to_h = Dense(F, D, lead=lead)
        self.config = config

    def project(self, h, rope):
        """Queries, keys (their first ``rotary_dim`` dimensions rotated) and values ``(B, T, H, d)``."""
        c = self.config
        B, T, _ = h.shape
        qkv = self.query_key_value(self.input_layernorm(h)).reshape(B, T, c.num_attention_heads, 3 * c.head_dim)
        q, k, v = jnp.split(qkv, 3, axis=-1)
        cos, sin = rope
        return partial_rope(q, cos, sin), partial_rope(k, cos, sin), v

    def attend(self, h, q, k, v, allowed, bias=None):
        """The parallel ``h + attn + mlp(ln2(h))`` or sequential ``a = h + attn; a + mlp(ln2(a))`` residual."""
        c = self.config
        attn = self.dense(merge_heads(attention(q, k, v, allowed, head_scale(c.head_dim), bias=bias)))
        if c.use_parallel_residual:
            return self._mlp(self.post_attention_layernorm(h)) + attn + h
        a = attn + h
        return self._mlp(self.post_attention_layernorm(a)) + a

    def _mlp(self, x):
        return self.dense_4h_to_h(ACTIVATIONS[self.config.activation](self.dense_h_to_4h(x)))


class GPTNeoX(CausalBody):
    """The GPT-NeoX body: token embeddings, the stacked layers, the final LayerNorm."""

    def __init__(self, config: GPTNeoXConfig):
        c = config
        self.embed_in = zeros(c.vocab_size, c.hidden_size)
        self.layers = GPTNeoXBlock(config, lead=(c.num_hidden_layers,))
        self.final_layer_norm = LayerNorm(c.hidden_size, c.layer_norm_eps)
        self.config = config

    @property
    def stack(self) -> GPTNeoXBlock:
        return self.layers

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.num_hidden_layers, c.num_attention_heads, c.head_dim

    def embed_inputs(self, input_ids, positions):
        return jnp.take(self.embed_in[...], input_ids, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return self.final_layer_norm(h)

    def block_positions(self, positions, dtype):
        return rope_tables(positions, self.config.rotary_dim, self.config.rope_theta, dtype)


def new_body(config: GPTNeoXConfig, body: Mapping | None = None) -> GPTNeoX:
    """The GPT-NeoX body module (zero parameters); every such body has the same structure."""
    return GPTNeoX(config)
