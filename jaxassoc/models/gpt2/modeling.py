"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners") as Flax NNX modules.

Pre-LayerNorm decoder: ``h = h + attn(ln_1(h)); h = h + mlp(ln_2(h))``, final ``ln_f``, learned
absolute positions, ``gelu_new`` (tanh GELU) in the MLP. HF's ``Conv1D`` weights are stored
``(in, out)``, which is already the ``x @ w`` layout of :class:`jaxassoc.models.layers.Dense`. Position
ids come from the mask (``layers.positions_from_mask``), so left- and right-padded batches give the same
states for the real tokens. The module state is ``{"wte", "wpe", "blocks": {...}, "ln_f"}``, the blocks
stacked on a leading layer axis.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.gpt2.config import GPT2Config
from jaxassoc.models.layers import (
    ACTIVATIONS,
    CausalBlock,
    CausalBody,
    Dense,
    LayerNorm,
    attention,
    head_scale,
    merge_heads,
    split_heads,
    zeros,
)


class GPT2Block(CausalBlock):
    """One GPT-2 block (all layers' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: GPT2Config, *, lead: tuple[int, ...] = ()):
        c = config
        D, F, eps = c.d_model, c.d_inner, c.layer_norm_eps
        self.ln_1 = LayerNorm(D, eps, lead=lead)
        self.c_attn = Dense(D, 3 * D, lead=lead)
        self.c_proj = Dense(D, D, lead=lead)
        self.ln_2 = LayerNorm(D, eps, lead=lead)
        self.c_fc = Dense(D, F, lead=lead)
        self.mlp_proj = Dense(F, D, lead=lead)
        self.config = config

    def project(self, h, positions):
        """Queries, keys and values ``(B, T, H, K)`` of the block's input (positions enter at the embedding)."""
        q, k, v = jnp.split(self.c_attn(self.ln_1(h)), 3, axis=-1)
        return tuple(split_heads(a, self.config.n_head) for a in (q, k, v))

    def attend(self, h, q, k, v, allowed, bias=None):
        """``h + Attn`` (queries of h's tokens over the given keys/values) then ``h + MLP(LayerNorm(h))``."""
        c = self.config
        scale = head_scale(c.d_model // c.n_head) if c.scale_attn_weights else 1.0
        h = h + self.c_proj(merge_heads(attention(q, k, v, allowed, scale, bias=bias)))
        return h + self.mlp_proj(ACTIVATIONS[c.activation](self.c_fc(self.ln_2(h))))


class GPT2(CausalBody):
    """The GPT-2 body: token and position embeddings, the stacked blocks, the final LayerNorm."""

    def __init__(self, config: GPT2Config):
        c = config
        self.wte = zeros(c.vocab_size, c.d_model)
        self.wpe = zeros(c.n_positions, c.d_model)
        self.blocks = GPT2Block(config, lead=(c.n_layer,))
        self.ln_f = LayerNorm(c.d_model, c.layer_norm_eps)
        self.config = config

    @property
    def stack(self) -> GPT2Block:
        return self.blocks

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.n_layer, c.n_head, c.d_model // c.n_head

    def embed_inputs(self, input_ids, positions):
        return jnp.take(self.wte[...], input_ids, axis=0) + jnp.take(self.wpe[...], positions, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return self.ln_f(h)


def new_body(config: GPT2Config, body: Mapping | None = None) -> GPT2:
    """The GPT-2 body module (zero parameters); every GPT-2 body has the same structure."""
    return GPT2(config)
