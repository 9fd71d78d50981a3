"""Normalisation layers as NNX modules (the functions they apply live in :mod:`jaxassoc.models.layers`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.models.layers import layer_norm, rms_norm, zeros


def gemma_rms_norm(x: Array, weight: Array, eps: float) -> Array:
    """Gemma's RMSNorm: ``x / rms(x) * (1 + w)``, all in float32, cast back to x's dtype."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (normed * (1.0 + weight.astype(jnp.float32))).astype(x.dtype)


class RMSNorm(nnx.Module):
    """RMSNorm (Zhang & Sennrich 2019, eq. 4) in float32 with a learned ``scale`` (Llama's ``weight``);
    ``plus_one``: Gemma's ``x / rms(x) * (1 + scale)`` (:func:`gemma_rms_norm`). State: ``{"scale"}``."""

    def __init__(self, dim: int, eps: float, *, plus_one: bool = False, lead: tuple[int, ...] = ()):
        self.scale = zeros(dim, axes=(None,), lead=lead)
        self.eps = eps
        self.plus_one = plus_one

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        norm = gemma_rms_norm if self.plus_one else rms_norm
        return norm(x, self.scale[...], self.eps)


class LayerNorm(nnx.Module):
    """LayerNorm (Ba et al. 2016) in float32 with a learned ``scale`` and, unless ``bias=False`` (MPT), a
    ``bias``. State: ``{"scale", "bias"}`` or ``{"scale"}``."""

    def __init__(self, dim: int, eps: float, *, bias: bool = True, lead: tuple[int, ...] = ()):
        self.scale = zeros(dim, axes=(None,), lead=lead)
        if bias:
            self.bias = zeros(dim, axes=(None,), lead=lead)
        self.eps = eps

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        return layer_norm(x, self.eps, self.scale[...], self.bias[...] if hasattr(self, "bias") else None)


class ParameterFreeLayerNorm(nnx.Module):
    """LayerNorm without scale or bias, in float32 (OLMo's ``OlmoLayerNorm``). State: none."""

    def __init__(self, eps: float):
        self.eps = eps

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        return layer_norm(x, self.eps)
