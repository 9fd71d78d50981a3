"""Gemma 3 text decoder as Flax NNX modules (Gemma Team 2025, "Gemma 3").

Gemma 2's layer (:mod:`jaxassoc.models.gemma2.modeling`) with (1 + w) RMSNorm of each query and key head
before the rotation (``q_norm``, ``k_norm``) and no attention soft-capping; local (sliding-window) layers
rotate with their own base (``rope_local_theta``), global ones with ``rope_theta`` and an optional linear
scaling (positions divided by ``rope_linear_factor``). Numerics follow
``transformers.models.gemma3.modeling_gemma3`` (``Gemma3ForCausalLM``).
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

from jaxassoc.models.gemma2.modeling import Gemma2, Gemma2Block, gemma_rms_norm
from jaxassoc.models.gemma3.config import Gemma3Config
from jaxassoc.models.layers import zeros


def scaled_rope_tables(positions, head_dim: int, theta: float, factor: float, dtype) -> tuple[jax.Array, jax.Array]:
    """cos and sin ``(B, T, d)`` of the rotary angles ``pos * theta^(-2i/d) / factor`` (linear scaling as
    transformers computes it: the inverse frequencies divided by ``factor``)."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim)) / factor
    angles = positions.astype(jnp.float32)[..., None] * inv_freq
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


class Gemma3Block(Gemma2Block):
    """Gemma 2's layer with query and key RMSNorm (one ``head_dim`` weight each, shared by the heads)."""

    def __init__(self, config: Gemma3Config, *, lead: tuple[int, ...] = ()):
        super().__init__(config, lead=lead)
        self.q_norm = zeros(*lead, config.head_dim)
        self.k_norm = zeros(*lead, config.head_dim)

    def normalize_qk(self, q, k):
        eps = self.config.rms_norm_eps
        return gemma_rms_norm(q, self.q_norm[...], eps), gemma_rms_norm(k, self.k_norm[...], eps)


class Gemma3(Gemma2):
    """The Gemma 3 text body: Gemma 2's, with Gemma3Block layers and per-layer-type rotary tables."""

    block = Gemma3Block

    def block_positions(self, positions, dtype) -> Any:
        """(global, local) ``(cos, sin)`` tables, computed once outside the layer scan."""
        c = self.config
        full = scaled_rope_tables(positions, c.head_dim, c.rope_theta, c.rope_linear_factor, dtype)
        return full, scaled_rope_tables(positions, c.head_dim, c.rope_local_theta, 1.0, dtype)

    def layer_positions(self, at, local):
        full, windowed = at
        return jax.tree.map(lambda glob, loc: jnp.where(local, loc, glob), full, windowed)


def new_body(config: Gemma3Config, body: Mapping | None = None) -> Gemma3:
    """The Gemma 3 text body module (zero parameters); every such body has the same structure."""
    return Gemma3(config)
