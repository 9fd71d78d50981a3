"""GPT-Neo (Black et al. 2021) as Flax NNX modules.

GPT-2's pre-LayerNorm decoder (learned absolute positions, ``gelu_new`` MLP, tied head) with two
differences, as in ``transformers.models.gpt_neo.modeling_gpt_neo``: attention scores are NOT scaled by
1/sqrt(head_dim) (scale 1.0) and are computed in float32 (q and k cast up); and the layers alternate global
and local attention (``attention_layers``): a local layer's query sees itself and the ``window_size - 1``
tokens before it (transformers' mask ``tril(ones) XOR tril(ones, -window_size)``), here the shared body's
window on position ids (``layers.CausalBody.window`` / ``local_layers``), so padding and packing keep it.
q/k/v have no bias, ``out_proj`` has one. The module state is ``{"wte", "wpe", "h": {...}, "ln_f"}``.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.gpt_neo.config import GPTNeoConfig
from jaxassoc.models.layers import (
    ACTIVATIONS,
    CausalBlock,
    CausalBody,
    Dense,
    LayerNorm,
    attention,
    merge_heads,
    split_heads,
    zeros,
)


class GPTNeoBlock(CausalBlock):
    """One GPT-Neo block (all blocks' parameters stacked on a leading axis of size ``lead``); whether it is
    local comes from the body's mask, not from the block."""

    def __init__(self, config: GPTNeoConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F, eps = c.hidden_size, c.intermediate_size, c.layer_norm_epsilon
        self.ln_1 = LayerNorm(D, eps, lead=lead)
        self.q_proj = zeros(*lead, D, D)
        self.k_proj = zeros(*lead, D, D)
        self.v_proj = zeros(*lead, D, D)
        self.out_proj = Dense(D, D, lead=lead)
        self.ln_2 = LayerNorm(D, eps, lead=lead)
        self.c_fc = Dense(D, F, lead=lead)
        self.c_proj = Dense(F, D, lead=lead)
        self.config = config

    def project(self, h, positions):
        """Queries, keys and values ``(B, T, H, d)`` (positions enter at the embedding)."""
        x = self.ln_1(h)
        H = self.config.num_heads
        return tuple(split_heads(x @ w[...], H) for w in (self.q_proj, self.k_proj, self.v_proj))

    def attend(self, h, q, k, v, allowed, bias=None):
        """``h + attn`` (unscaled, float32 scores) then ``h + mlp(ln_2(h))``."""
        scores_dtype = jnp.promote_types(q.dtype, jnp.float32)
        attended = attention(q.astype(scores_dtype), k.astype(scores_dtype), v, allowed, 1.0, bias=bias)
        h = self.out_proj(merge_heads(attended)) + h
        return h + self.c_proj(ACTIVATIONS[self.config.activation](self.c_fc(self.ln_2(h))))


class GPTNeo(CausalBody):
    """The GPT-Neo body: token and position embeddings, the stacked blocks (local ones windowed), ``ln_f``."""

    def __init__(self, config: GPTNeoConfig):
        c = config
        self.wte = zeros(c.vocab_size, c.hidden_size)
        self.wpe = zeros(c.max_position_embeddings, c.hidden_size)
        self.h = GPTNeoBlock(config, lead=(c.num_layers,))
        self.ln_f = LayerNorm(c.hidden_size, c.layer_norm_epsilon)
        self.local_layers = tuple(kind == "local" for kind in c.attention_layers)
        self.window = c.window_size if any(self.local_layers) else None
        self.config = config

    @property
    def stack(self) -> GPTNeoBlock:
        return self.h

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.num_layers, c.num_heads, c.head_dim

    def embed_inputs(self, input_ids, positions):
        return jnp.take(self.wte[...], input_ids, axis=0) + jnp.take(self.wpe[...], positions, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return self.ln_f(h)


def new_body(config: GPTNeoConfig, body: Mapping | None = None) -> GPTNeo:
    """The GPT-Neo body module (zero parameters); every such body has the same structure."""
    return GPTNeo(config)
