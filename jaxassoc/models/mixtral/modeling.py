"""Mixtral decoder as Flax NNX modules (Jiang et al. 2024, "Mixtral of Experts").

Mistral's attention (RMSNorm, rotary embeddings in the "rotate half" layout, grouped-query attention, an
optional sliding window on position ids) with a sparse mixture-of-experts feed-forward (Jiang et al. 2024,
eqs. 1-2; Shazeer et al. 2017): a router ``(D, E)`` gives each token softmax probabilities over the E
experts, the top ``k`` are kept and renormalised to sum to 1, and the output is their weighted sum of the
chosen experts' SwiGLU outputs. The computation here is *dense*: every expert runs on every token and is
weighted by its routing weight, 0 for the experts not chosen, which equals the sparse dispatch exactly
(same ``top_k`` selection as ``torch.topk`` up to exact ties) at ``E / k`` times the expert FLOPs.

Numerics follow ``transformers.models.mixtral.modeling_mixtral``: router logits in the parameters' dtype,
softmax and the routing weights in float32; RMSNorm and the attention softmax in float32. The module state
is ``{"embed", "layers": {...}, "norm"}``, expert weights stacked ``(layers, experts, in, out)``.
"""

from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxassoc.models.layers import (
    CausalBlock,
    RotaryBody,
    apply_rope,
    attention,
    head_scale,
    rms_norm,
    zeros,
)
from jaxassoc.models.mixtral.config import MixtralConfig


def routing_weights(router_logits: Float[Array, "... E"], k: int) -> Float[Array, "... E"]:
    """Each expert's weight per token (float32): the softmax probabilities of the top ``k`` experts,
    renormalised to sum to 1, and 0 for the others (Mixtral's router)."""
    probs = jax.nn.softmax(router_logits.astype(jnp.float32), axis=-1)
    top, chosen = jax.lax.top_k(probs, k)
    top = top / top.sum(-1, keepdims=True)
    return jnp.sum(jax.nn.one_hot(chosen, probs.shape[-1], dtype=jnp.float32) * top[..., None], axis=-2)


def moe(
    h: Float[Array, "B T D"],
    router: Float[Array, "D E"],
    gate: Float[Array, "E D F"],
    up: Float[Array, "E D F"],
    down: Float[Array, "E F D"],
    k: int,
) -> Float[Array, "B T D"]:
    """The sparse mixture of SwiGLU experts, computed densely: ``sum_e w_e(h) * down_e(silu(h gate_e) * h up_e)``."""
    weights = routing_weights(h @ router, k).astype(h.dtype)
    inner = jax.nn.silu(jnp.einsum("btd,edf->btef", h, gate)) * jnp.einsum("btd,edf->btef", h, up)
    return jnp.einsum("btef,efd->btd", inner * weights[..., None], down)


class MixtralBlock(CausalBlock):
    """One decoder layer: ``x + Attn(RMSNorm(x))`` then ``x + MoE(RMSNorm(x))``; projections ``(in, out)``,
    all layers' parameters stacked on a leading axis of size ``lead``."""

    def __init__(self, config: MixtralConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F, E = c.hidden_size, c.intermediate_size, c.num_local_experts
        q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
        self.attn_norm = zeros(*lead, D)
        self.q = zeros(*lead, D, q)
        self.k = zeros(*lead, D, kv)
        self.v = zeros(*lead, D, kv)
        self.o = zeros(*lead, q, D)
        self.mlp_norm = zeros(*lead, D)
        self.router = zeros(*lead, D, E)
        self.gate = zeros(*lead, E, D, F)
        self.up = zeros(*lead, E, D, F)
        self.down = zeros(*lead, E, F, D)
        self.config = config

    def project(self, x, rope):
        """Queries ``(B, T, H, d)``, rotated keys and values ``(B, T, KV, d)``; ``rope`` is ``(cos, sin)``."""
        c = self.config
        B, T, _ = x.shape
        H, KV, d = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        cos, sin = rope
        h = rms_norm(x, self.attn_norm[...], c.rms_norm_eps)
        q = apply_rope((h @ self.q[...]).reshape(B, T, H, d), cos, sin)
        k = apply_rope((h @ self.k[...]).reshape(B, T, KV, d), cos, sin)
        return q, k, (h @ self.v[...]).reshape(B, T, KV, d)

    def attend(self, x, q, k, v, allowed, bias=None):
        """``x + Attn`` (queries of x's tokens over the given keys/values) then ``x + MoE(RMSNorm(x))``."""
        c = self.config
        B, T, _ = x.shape
        attended = attention(q, k, v, allowed, head_scale(c.head_dim), bias=bias).reshape(B, T, -1)
        x = x + attended @ self.o[...]
        h = rms_norm(x, self.mlp_norm[...], c.rms_norm_eps)
        return x + moe(h, self.router[...], self.gate[...], self.up[...], self.down[...], c.num_experts_per_tok)


class Mixtral(RotaryBody):
    """The Mixtral body (``layers.RotaryBody`` with routed-expert blocks)."""

    block = MixtralBlock


def new_body(config: MixtralConfig, body: Mapping | None = None) -> Mixtral:
    """The Mixtral body module (zero parameters); every such body has the same structure."""
    return Mixtral(config)
