"""A linear projection as an NNX module: ``x @ w (+ b)``, the weight stored ``(in, out)``; the product under the
precision policy its dtypes make (:func:`jaxassoc.models.precision.matmul`); plus a low-rank adapter's term when
one is attached (:mod:`jaxassoc.models.lora`)."""

from __future__ import annotations

from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.models.layers import HEAD_AXES, Axes, zeros
from jaxassoc.models.precision import matmul


class Linear(nnx.Module):
    """``x @ w + b`` (``b`` only with ``bias``); ``axes``: the logical axes of ``(in, out)`` (the bias takes
    the output's, but is never split along ``embed``: FSDP shards weights), ``heads`` the heads one holds; ``lead`` stacks the parameters of several layers
    on leading axes (``layers.scan_layers``). State: ``{"w"}`` or ``{"w", "b"}``, and ``"lora"`` when a low-rank
    adapter is attached (:mod:`jaxassoc.models.lora`: ``x W + b + s (x A) B``)."""

    def __init__(
        self,
        n_in: int,
        n_out: int,
        *,
        axes: Axes,
        heads: int | None = None,
        bias: bool = False,
        lead: tuple[int, ...] = (),
    ):
        self.w = zeros(n_in, n_out, axes=axes, heads=heads, lead=lead)
        if bias:
            out = None if axes[1] == "embed" else axes[1]
            self.b = zeros(n_out, axes=(out,), heads=heads if out in HEAD_AXES else None, lead=lead)

    def __call__(self, x: Float[Array, "... I"]) -> Float[Array, "... O"]:
        y = matmul(x, self.w[...])
        y = y + self.b[...] if hasattr(self, "b") else y
        return y + self.lora(x) if hasattr(self, "lora") else y
