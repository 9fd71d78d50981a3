"""Feed-forward layers as NNX modules."""

from __future__ import annotations

import jax
from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.models.linear import Linear


class GatedMLP(nnx.Module):
    """SwiGLU (Shazeer 2020): ``down(silu(gate(x)) * up(x))``, no biases. State: ``{"gate", "up", "down"}``."""

    def __init__(self, dim: int, hidden: int, *, lead: tuple[int, ...] = ()):
        self.gate = Linear(dim, hidden, lead=lead)
        self.up = Linear(dim, hidden, lead=lead)
        self.down = Linear(hidden, dim, lead=lead)

    def __call__(self, x: Float[Array, "... D"]) -> Float[Array, "... D"]:
        return self.down(jax.nn.silu(self.gate(x)) * self.up(x))
