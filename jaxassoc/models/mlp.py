"""Feed-forward layers as NNX modules: the two-layer MLP, the gated (SwiGLU / GeGLU) MLP and a mixture of
SwiGLU experts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.models.layers import ACTIVATIONS
from jaxassoc.models.linear import Linear
from jaxassoc.models.precision import einsum, matmul
from jaxassoc.models.sites import Tap, tap_site


class MLP(nnx.Module):
    """The transformer feed-forward layer (Vaswani et al. 2017, eq. 2): ``down(act(up(x)))``, with biases
    unless ``bias=False`` (MPT). State: ``{"up", "down"}``."""

    def __init__(self, dim: int, hidden: int, *, activation: str, bias: bool = True, lead: tuple[int, ...] = ()):
        self.up = Linear(dim, hidden, axes=("embed", "mlp"), bias=bias, lead=lead)
        self.down = Linear(hidden, dim, axes=("mlp", "embed"), bias=bias, lead=lead)
        self.activation = activation

    def __call__(self, x: Float[Array, "... D"], tap: Tap | None = None) -> Float[Array, "... D"]:
        return self.down(tap_site(tap, "mlp.hidden", ACTIVATIONS[self.activation](self.up(x))))


class GatedMLP(nnx.Module):
    """A gated MLP (Shazeer 2020): ``down(act(gate(x)) * up(x))``, no biases; SwiGLU with ``activation="silu"``,
    GeGLU with a GELU (Gemma: ``gelu_pytorch_tanh``). State: ``{"gate", "up", "down"}``."""

    def __init__(self, dim: int, hidden: int, *, activation: str = "silu", lead: tuple[int, ...] = ()):
        self.gate = Linear(dim, hidden, axes=("embed", "mlp"), lead=lead)
        self.up = Linear(dim, hidden, axes=("embed", "mlp"), lead=lead)
        self.down = Linear(hidden, dim, axes=("mlp", "embed"), lead=lead)
        self.activation = activation

    def __call__(self, x: Float[Array, "... D"], tap: Tap | None = None) -> Float[Array, "... D"]:
        act = jax.nn.silu if self.activation == "silu" else ACTIVATIONS[self.activation]
        return self.down(tap_site(tap, "mlp.hidden", act(self.gate(x)) * self.up(x)))


def routing_weights(router_logits: Float[Array, "... E"], k: int) -> Float[Array, "... E"]:
    """Each expert's weight per token (float32): the softmax probabilities of the top ``k`` experts,
    renormalised to sum to 1, and 0 for the others (Mixtral's router; Jiang et al. 2024, eqs. 1-2)."""
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
    tap: Tap | None = None,
) -> Float[Array, "B T D"]:
    """The sparse mixture of SwiGLU experts, computed densely: ``sum_e w_e(h) * down_e(silu(h gate_e) * h up_e)``;
    each expert's hidden activations times its weight ``(B, T, E, F)`` are the site ``mlp.hidden``."""
    weights = routing_weights(matmul(h, router), k).astype(h.dtype)
    inner = jax.nn.silu(einsum("btd,edf->btef", h, gate)) * einsum("btd,edf->btef", h, up)
    return einsum("btef,efd->btd", tap_site(tap, "mlp.hidden", inner * weights[..., None]), down)


class MoE(nnx.Module):
    """A sparse mixture of ``experts`` SwiGLU experts, the top ``k`` per token (Jiang et al. 2024; Shazeer et
    al. 2017), computed *densely*: every expert runs on every token, weighted by its routing weight (0 for
    the experts not chosen), which equals the sparse dispatch exactly (same ``top_k`` selection as
    ``torch.topk`` up to exact ties) at ``experts / k`` times the expert FLOPs. Router logits in the
    parameters' dtype, routing weights in float32 (transformers' Mixtral). State: ``{"router", "gate", "up",
    "down"}`` (each ``{"w"}``; the experts' weights stacked on an expert axis after the layer axis)."""

    def __init__(self, dim: int, hidden: int, experts: int, k: int, *, lead: tuple[int, ...] = ()):
        self.router = Linear(dim, experts, axes=("embed", None), lead=lead)
        self.gate = Linear(dim, hidden, axes=("embed", "mlp"), lead=(*lead, experts))
        self.up = Linear(dim, hidden, axes=("embed", "mlp"), lead=(*lead, experts))
        self.down = Linear(hidden, dim, axes=("mlp", "embed"), lead=(*lead, experts))
        self.k = k

    def __call__(self, x: Float[Array, "B T D"], tap: Tap | None = None) -> Float[Array, "B T D"]:
        return moe(x, self.router.w[...], self.gate.w[...], self.up.w[...], self.down.w[...], self.k, tap)
