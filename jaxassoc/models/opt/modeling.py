"""OPT (Zhang et al. 2022, "OPT: Open Pre-trained Transformer Language Models") as Flax NNX modules.

A decoder with learned absolute positions, read at ``position + 2`` (the table has two extra leading rows,
HF's ``OPTLearnedPositionalEmbedding`` offset), biased projections and a ReLU MLP. Pre-LN
(``do_layer_norm_before``, all sizes but 350m: ``h = h + attn(ln(h))``, a final LayerNorm) or post-LN
(opt-350m: ``h = ln(h + attn(h))``, no final LayerNorm). When ``word_embed_proj_dim != hidden_size``
(opt-350m) the word embeddings are projected in (``project_in``) and the last hidden state out
(``project_out``, part of the head input), both without bias. Queries are scaled by ``head_dim**-0.5``
before the dot product, as in ``transformers.models.opt.modeling_opt``. Position ids come from the mask
(``layers.positions_from_mask``), so padding on either side and packed rows give each sequence's states.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

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
from jaxassoc.models.opt.config import OPTConfig

POSITION_OFFSET = 2
"""Rows of the position table before position 0 (HF ``OPTLearnedPositionalEmbedding.offset``)."""


class OPTBlock(CausalBlock):
    """One OPT decoder layer (all layers' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: OPTConfig, *, lead: tuple[int, ...] = ()):
        D, F, eps = config.hidden_size, config.ffn_dim, config.layer_norm_eps
        self.attn_ln = LayerNorm(D, eps, lead=lead)
        self.q = Dense(D, D, lead=lead)
        self.k = Dense(D, D, lead=lead)
        self.v = Dense(D, D, lead=lead)
        self.o = Dense(D, D, lead=lead)
        self.mlp_ln = LayerNorm(D, eps, lead=lead)
        self.fc1 = Dense(D, F, lead=lead)
        self.fc2 = Dense(F, D, lead=lead)
        self.config = config

    def project(self, h, positions):
        """Scaled queries, keys and values ``(B, T, H, K)`` (positions enter at the embedding)."""
        c = self.config
        x = self.attn_ln(h) if c.do_layer_norm_before else h
        q = self.q(x) * head_scale(c.hidden_size // c.num_attention_heads)
        return tuple(split_heads(a, c.num_attention_heads) for a in (q, self.k(x), self.v(x)))

    def attend(self, h, q, k, v, allowed, bias=None):
        """The attention and MLP sub-blocks with their residuals, LayerNorm before (pre-LN) or after (post-LN)."""
        c = self.config
        pre = c.do_layer_norm_before
        h = h + self.o(merge_heads(attention(q, k, v, allowed, 1.0, bias=bias)))
        if not pre:
            h = self.attn_ln(h)
        x = self.mlp_ln(h) if pre else h
        h = h + self.fc2(ACTIVATIONS[c.activation](self.fc1(x)))
        return h if pre else self.mlp_ln(h)


class OPT(CausalBody):
    """The OPT body: word embeddings (projected in if needed) plus learned positions, the stacked layers,
    the final LayerNorm (pre-LN models) and the projection out (if needed)."""

    def __init__(self, config: OPTConfig):
        c = config
        self.embed = zeros(c.vocab_size, c.word_embed_proj_dim)
        self.positions = zeros(c.max_position_embeddings + POSITION_OFFSET, c.hidden_size)
        if c.projected:
            self.project_in = zeros(c.word_embed_proj_dim, c.hidden_size)
            self.project_out = zeros(c.hidden_size, c.word_embed_proj_dim)
        self.layers = OPTBlock(config, lead=(c.num_hidden_layers,))
        if c.final_layer_norm:
            self.final_ln = LayerNorm(c.hidden_size, c.layer_norm_eps)
        self.config = config

    @property
    def stack(self) -> OPTBlock:
        return self.layers

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.num_hidden_layers, c.num_attention_heads, c.hidden_size // c.num_attention_heads

    def embed_inputs(self, input_ids, positions):
        x = jnp.take(self.embed[...], input_ids, axis=0)
        if self.config.projected:
            x = x @ self.project_in[...]
        return x + jnp.take(self.positions[...], positions + POSITION_OFFSET, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        if self.config.final_layer_norm:
            h = self.final_ln(h)
        return h @ self.project_out[...] if self.config.projected else h


def new_body(config: OPTConfig, body: Mapping | None = None) -> OPT:
    """The OPT body module (zero parameters); its structure follows the config alone."""
    return OPT(config)
