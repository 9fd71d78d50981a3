"""Pieces shared by the Flax NNX ports: parameters with logical axes, the norm and activation functions, the
HF config helpers every family uses, and the layer scan with its named sites. By subject beside it: rotary
embeddings (:mod:`~jaxassoc.models.rope`), masks and position ids (:mod:`~jaxassoc.models.masks`), the
attention function (:mod:`~jaxassoc.models.attention`) and the causal decoder body with its key/value cache
(:mod:`~jaxassoc.models.causal_body`).

Every port is an ``nnx.Module`` tree whose attribute names are the keys of its parameter pytree, so the
NNX state of a body as a pure dict *is* ``params["body"]`` (``nnx.merge(graphdef, body)`` rebuilds the
module from it). Per-layer parameters are stacked on a leading axis: a family's block module is built
once with that axis on every parameter (``lead=(n_layers,)``) and :func:`scan_layers` runs it under
``jax.lax.scan`` over its split state (``nnx.split`` outside the scan, ``nnx.merge`` of one layer's slice
per step), so a model compiles one block whatever its depth. Parameters are created as zeros: a port is
filled by loading a checkpoint (``load_model``), and its shapes come from ``nnx.eval_shape``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from jaxassoc.errors import ModelError
from jaxassoc.models.sites import SiteOps, tap_site

Axes = tuple[str | None, ...]
"""Logical axes of one parameter, one per dimension (``mesh.RULES`` maps them onto the mesh), e.g.
``("layers", "embed", "heads")``; None: never sharded."""


def zeros(*shape: int, axes: Axes, heads: int | None = None, lead: tuple[int, ...] = ()) -> nnx.Param:
    """A float32 parameter of ``lead + shape`` (its values come from a checkpoint) carrying its logical ``axes``
    (``nnx.Param`` metadata ``out_sharding``, read by ``nnx.get_partition_spec``); ``lead`` stacks several
    layers (their axis ``"layers"``, an expert axis after it unsharded). ``heads``: how many heads its
    ``heads`` / ``kv_heads`` dimension holds (a head is never split over devices)."""
    full = (*lead_axes(lead), *axes)
    if len(full) != len(lead) + len(shape):
        raise ModelError(f"a parameter of shape {(*lead, *shape)} was given {len(full)} logical axes {full}")
    metadata = {} if heads is None else {"heads": heads}
    return nnx.Param(jnp.zeros((*lead, *shape), jnp.float32), out_sharding=full, eager_sharding=False, **metadata)


HEAD_AXES = ("heads", "kv_heads")
"""The logical axes that hold whole heads."""


def lead_axes(lead: tuple[int, ...]) -> Axes:
    """The logical axes of stacked dimensions: the layers', then unsharded ones (a mixture's experts)."""
    return ("layers", *(None,) * (len(lead) - 1)) if lead else ()


def layer_norm(x: Float[Array, "... D"], eps: float, scale: Array | None = None, bias: Array | None = None) -> Array:
    """LayerNorm in float32 with an optional scale and bias (None: left out; MPT has no bias, OLMo neither)."""
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    y = (x32 - mean) * jax.lax.rsqrt(jnp.square(x32 - mean).mean(-1, keepdims=True) + eps)
    if scale is not None:
        y = y * scale.astype(jnp.float32)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    return y.astype(x.dtype)


def rms_norm(x: Float[Array, "... D"], weight: Float[Array, " D"], eps: float) -> Float[Array, "... D"]:
    """RMSNorm (Zhang & Sennrich 2019, eq. 4), computed in float32 as in Llama."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight * normed.astype(x.dtype)


def gelu_tanh(x: Array) -> Array:
    """GPT-2's ``gelu_new``: the tanh approximation of GELU (Hendrycks & Gimpel 2016)."""
    return jax.nn.gelu(x, approximate=True)


def gelu_erf(x: Array) -> Array:
    """The exact (erf) GELU used by BERT and RoBERTa."""
    return jax.nn.gelu(x, approximate=False)


ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": gelu_erf,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": jax.nn.relu,
}


def check_activation(name: str, field: str) -> str:
    """Return ``name`` if it is a handled activation, else raise ModelError naming the config field."""
    if name not in ACTIVATIONS:
        raise ModelError(
            f"config field {field}={name!r} is not supported; supported activations: {sorted(ACTIVATIONS)}"
        )
    return name


@contextlib.contextmanager
def required_fields(family: str) -> Iterator[None]:
    """Turn a KeyError while reading a HF config into a ModelError naming the missing field."""
    try:
        yield
    except KeyError as e:
        raise ModelError(f"the {family} config.json lacks the required field {e.args[0]!r}") from None


def scan_layers(stack: nnx.Module, step: Callable, carry: Any, xs: Any = None) -> tuple[Any, Any]:
    """``jax.lax.scan`` of ``step(layer, carry, x) -> (carry, y)`` over the layers of a stacked module:
    its state is split once, and each step merges its layer's slice into a one-layer module."""
    graphdef, state = nnx.split(stack)

    def body(carry, sliced):
        layer_state, x = sliced
        return step(nnx.merge(graphdef, layer_state), carry, x)

    return jax.lax.scan(body, carry, (state, xs))


def scan_blocks(
    stack: nnx.Module, run_block: Callable, h: Array, xs: Any, *, sites: SiteOps | None, keep: bool
) -> tuple[Array, Array | None, dict | None]:
    """:func:`scan_layers` of ``run_block(block, h, x, tap) -> h`` with the named sites of each layer
    (``resid_pre``, the block's own, ``resid_post``) read and edited through ``sites``: ``(h, every layer's
    output if keep, the stacked per-layer records)``."""

    def step(block, h, inputs):
        x, index, stacked = inputs
        tap = None if sites is None else sites.tap(index, stacked)

        def run(h):
            return tap_site(tap, "resid_post", run_block(block, tap_site(tap, "resid_pre", h), x, tap))

        if sites is not None and sites.start is not None:  # resumed: the layers before start do not run
            out = jax.lax.cond(index >= sites.start[0], run, lambda h: h, h)
        else:
            out = run(h)
        return out, (out if keep else None, None if tap is None else tap.records)

    n_layers = jax.tree.leaves(nnx.state(stack))[0].shape[0]
    stacked = {} if sites is None else sites.stacked
    h, (per_layer, records) = scan_layers(stack, step, h, (xs, jnp.arange(n_layers), stacked))
    return h, per_layer, records


def finish_sites(sites: SiteOps | None, hidden: Array, records: dict | None) -> tuple[Array, dict | None]:
    """The head input after the ``final_norm`` site's edit, and every requested read by name."""
    if sites is None:
        return hidden, None
    model_records: dict = {}
    hidden = sites.model_site("final_norm", hidden, model_records)
    return hidden, sites.collect(records, model_records)
