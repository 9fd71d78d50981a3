"""A linear projection as an NNX module: ``x @ w (+ b)``, the weight stored ``(in, out)``."""

from __future__ import annotations

from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.models.layers import zeros


class Linear(nnx.Module):
    """``x @ w + b`` (``b`` only with ``bias``); ``lead`` stacks the parameters of several layers on
    leading axes (``layers.scan_layers``). State: ``{"w"}`` or ``{"w", "b"}``."""

    def __init__(self, n_in: int, n_out: int, *, bias: bool = False, lead: tuple[int, ...] = ()):
        self.w = zeros(*lead, n_in, n_out)
        if bias:
            self.b = zeros(*lead, n_out)

    def __call__(self, x: Float[Array, "... I"]) -> Float[Array, "... O"]:
        y = x @ self.w[...]
        return y + self.b[...] if hasattr(self, "b") else y
