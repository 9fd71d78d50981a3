"""GPT-J (Wang & Komatsuzaki 2021, mesh-transformer-jax) as Flax NNX modules.

A decoder whose blocks are parallel: one LayerNorm feeds both attention and the MLP, ``x + attn(ln_1(x)) +
mlp(ln_1(x))``. Rotary position embeddings (Su et al. 2021, eq. 34, base 10000) act on the first
``rotary_dim`` dimensions of each head in interleaved pairs ("rotate every two": dimensions (2i, 2i+1) turn
by the i-th angle); the rest pass unchanged. q/k/v/out projections have no bias, the MLP and the output
head do. As in ``transformers.models.gptj.modeling_gptj`` the attention scores are computed in float32 (q
and k cast up) and scaled by 1/sqrt(head_dim). The module state is ``{"wte", "h": {...}, "ln_f"}``, the
blocks stacked on a leading axis and scanned.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.gptj.config import GPTJConfig
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


def interleaved_rope_tables(positions: jax.Array, rotary_dim: int, dtype) -> tuple[jax.Array, jax.Array]:
    """cos and sin ``(B, T, rotary_dim)`` of the angles ``pos * 10000^(-2i/rotary_dim)``, each repeated for
    the pair (2i, 2i+1) it turns."""
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(0, rotary_dim, 2, dtype=jnp.float32) / rotary_dim))
    angles = jnp.repeat(positions.astype(jnp.float32)[..., None] * inv_freq, 2, axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def rotate_every_two(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """Rotate the pairs (2i, 2i+1) of the first ``cos.shape[-1]`` dimensions of each head; keep the rest."""
    d = cos.shape[-1]
    rot = x[..., :d]
    turned = jnp.stack([-rot[..., 1::2], rot[..., ::2]], axis=-1).reshape(rot.shape)
    rotated = rot * cos[:, :, None, :] + turned * sin[:, :, None, :]
    return jnp.concatenate([rotated, x[..., d:]], axis=-1)


class GPTJBlock(CausalBlock):
    """One GPT-J block (all blocks' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: GPTJConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F = c.n_embd, c.n_inner
        self.ln_1 = LayerNorm(D, c.layer_norm_epsilon, lead=lead)
        self.q_proj = zeros(*lead, D, D)
        self.k_proj = zeros(*lead, D, D)
        self.v_proj = zeros(*lead, D, D)
        self.out_proj = zeros(*lead, D, D)
        self.fc_in = Dense(D, F, lead=lead)
        self.fc_out = Dense(F, D, lead=lead)
        self.config = config

    def project(self, h, rope):
        """Queries and keys (first ``rotary_dim`` dimensions rotated in pairs) and values ``(B, T, H, d)``."""
        H = self.config.n_head
        x = self.ln_1(h)
        cos, sin = rope
        q = rotate_every_two(split_heads(x @ self.q_proj[...], H), cos, sin)
        k = rotate_every_two(split_heads(x @ self.k_proj[...], H), cos, sin)
        return q, k, split_heads(x @ self.v_proj[...], H)

    def attend(self, h, q, k, v, allowed, bias=None):
        """``h + attn + mlp``, both of ``ln_1(h)``; scores in float32."""
        c = self.config
        scores_dtype = jnp.promote_types(q.dtype, jnp.float32)
        attended = attention(
            q.astype(scores_dtype), k.astype(scores_dtype), v, allowed, head_scale(c.head_dim), bias=bias
        )
        attn = merge_heads(attended) @ self.out_proj[...]
        mlp = self.fc_out(ACTIVATIONS[c.activation](self.fc_in(self.ln_1(h))))
        return attn + mlp + h


class GPTJ(CausalBody):
    """The GPT-J body: token embeddings, the stacked blocks, the final LayerNorm."""

    def __init__(self, config: GPTJConfig):
        c = config
        self.wte = zeros(c.vocab_size, c.n_embd)
        self.h = GPTJBlock(config, lead=(c.n_layer,))
        self.ln_f = LayerNorm(c.n_embd, c.layer_norm_epsilon)
        self.config = config

    @property
    def stack(self) -> GPTJBlock:
        return self.h

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        c = self.config
        return c.n_layer, c.n_head, c.head_dim

    def embed_inputs(self, input_ids, positions):
        return jnp.take(self.wte[...], input_ids, axis=0)

    def final_norm(self, h: jax.Array) -> jax.Array:
        return self.ln_f(h)

    def block_positions(self, positions, dtype):
        return interleaved_rope_tables(positions, self.config.rotary_dim, dtype)


def new_body(config: GPTJConfig, body: Mapping | None = None) -> GPTJ:
    """The GPT-J body module (zero parameters); every such body has the same structure."""
    return GPTJ(config)
