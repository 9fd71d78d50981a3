"""Normalisation layers as NNX modules (the functions they apply live in :mod:`jaxassoc.models.layers`)."""

from __future__ import annotations

from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.models.layers import layer_norm, rms_norm, zeros


class RMSNorm(nnx.Module):
    """RMSNorm (Zhang & Sennrich 2019, eq. 4) in float32 with a learned ``scale`` (Llama's ``weight``)."""

    def __init__(self, dim: int, eps: float, *, lead: tuple[int, ...] = ()):
        self.scale = zeros(*lead, dim)
        self.eps = eps

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        return rms_norm(x, self.scale[...], self.eps)


class ParameterFreeLayerNorm(nnx.Module):
    """LayerNorm without scale or bias, in float32 (OLMo's ``OlmoLayerNorm``). State: none."""

    def __init__(self, eps: float):
        self.eps = eps

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        return layer_norm(x, self.eps)
