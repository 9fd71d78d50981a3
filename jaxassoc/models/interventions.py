"""Run a model while reading and editing its named sites (:mod:`jaxassoc.models.sites`): activation
patching, zero and mean ablation, steering, any function of a site. Pure functions of arrays: they jit,
vmap over the edits' arrays (e.g. one head mask per intervention), differentiate, and run sharded like
the plain forward (the edits are inputs of the same layer scan). A run that edits nothing is the plain
forward; one whose edits leave every value as it was (``Replace`` where nothing is selected) equals it
bit for bit (tested).

    out = run(model.port, model.params["body"], ids, mask, config=model.config,
              read=["layers.7.attn.heads"], edits=ablate_heads({3: [0, 5]}, shapes))
    out.hidden, out.sites["layers.7.attn.heads"]

An encoder-decoder (T5): ``run`` is its encoder's pass, :func:`run_decoder` its decoder's over given
encoder states, each stack with its own ``layers.{i}`` sites.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.sites import ALL_LAYERS, DECODER_LAYER_SITES, LAYER_SITES, MODEL_SITES, Edit, Replace, SiteOps


def layer_count(body: Mapping, stack: str = "encoder") -> int:
    """The number of blocks of a body pytree (the leading axis of its stacked ``layers``); an
    encoder-decoder's ``stack`` ("encoder" or "decoder")."""
    blocks = body["layers"] if "layers" in body else body[stack]["blocks"]
    return int(jax.tree.leaves(blocks)[0].shape[0])


def run(
    port: Any,
    body: Mapping,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    *,
    config: Any,
    read: Sequence[str] = (),
    edits: Mapping[str, Edit] | None = None,
    start: tuple[Any, Float[Array, "B T D"]] | None = None,
) -> ForwardOutput:
    """The forward pass of ``port`` (a model's ``port``) with ``edits`` applied at their sites and the sites
    in ``read`` returned in ``ForwardOutput.sites`` (as the model used them, after any edit). ModelError
    naming an unknown site (listing the valid ones) or an edit that does not fit its site.

    ``start=(layer, resid_pre)`` resumes the pass at ``layer`` from that layer's ``resid_pre`` (read from an
    earlier run of the same input): the layers before it are skipped, not recomputed, which is exact when
    no edit touches them (a causal family: the masks and positions come from ``attention_mask``). Under
    ``vmap`` keep ``layer`` unbatched (one layer per call, e.g. ``lax.map`` over layers) or both branches run.
    An encoder-decoder's: its encoder (:func:`run_decoder` for the decoder)."""
    if isinstance(read, str):
        read = (read,)
    if start is not None and port.objective != "causal":
        raise ModelError(
            f"start=(layer, resid_pre) resumes a causal forward; the {port.name} family is {port.objective}"
        )
    sites = SiteOps.build(layer_count(body), tuple(read), edits, start)
    return port.forward(body, input_ids, attention_mask, config=config, sites=sites)


def run_decoder(
    port: Any,
    body: Mapping,
    encoder_hidden: Float[Array, "B S D"],
    encoder_mask: Int[Array, "B S"],
    decoder_ids: Int[Array, "B T"],
    decoder_mask: Int[Array, "B T"],
    *,
    config: Any,
    read: Sequence[str] = (),
    edits: Mapping[str, Edit] | None = None,
) -> ForwardOutput:
    """An encoder-decoder's teacher-forced decoder pass (``port.decode``) over ``encoder_hidden`` (from
    :func:`run` or the plain forward) with ``edits`` and ``read`` at the decoder's sites
    (:data:`~jaxassoc.models.sites.DECODER_LAYER_SITES`, ``final_norm``). ModelError for a family without
    a decoder, an unknown site or an edit that does not fit."""
    if port.objective != "seq2seq":
        raise ModelError(f"run_decoder runs an encoder-decoder's decoder; the {port.name} family is {port.objective}")
    if isinstance(read, str):
        read = (read,)
    sites = SiteOps.build(layer_count(body, "decoder"), tuple(read), edits, kinds=DECODER_LAYER_SITES)
    return port.decode(body, encoder_hidden, encoder_mask, decoder_ids, decoder_mask, config=config, sites=sites)


def site_shapes(port: Any, body: Mapping, *, config: Any) -> dict[str, tuple[int, ...]]:
    """Each site kind's shape after the ``(B, T)`` axes (``attn.heads``: ``(H, d)``), traced, not run."""
    names = [f"layers.0.{kind}" for kind in LAYER_SITES] + list(MODEL_SITES)
    ids = jax.ShapeDtypeStruct((1, 1), jnp.int32)
    out = jax.eval_shape(lambda b, i, m: run(port, b, i, m, config=config, read=names).sites, body, ids, ids)
    return {
        name.rsplit(".", 1)[-1] if name in MODEL_SITES else name.split(".", 2)[2]: s.shape[2:]
        for name, s in out.items()
    }


def unit_mask(
    units: Mapping[int, Sequence[int]], n_layers: int, n_units: int, what: str = "head"
) -> Bool[Array, "L N"]:
    """``(layers, units)`` booleans, True at ``units[layer]``; ModelError naming a layer or a unit (head,
    neuron) out of range."""
    mask = np.zeros((n_layers, n_units), bool)
    for layer, chosen in units.items():
        if not 0 <= int(layer) < n_layers:
            raise ModelError(f"{what}s of layer {layer}: this model has layers 0..{n_layers - 1}")
        for unit in chosen:
            if not 0 <= int(unit) < n_units:
                raise ModelError(
                    f"{what} {unit} of layer {layer} is out of range: each layer has {what}s 0..{n_units - 1}"
                )
            mask[int(layer), int(unit)] = True
    return jnp.asarray(mask)


def ablate_heads(
    heads: Mapping[int, Sequence[int]] | Bool[Array, "L H"],
    n_layers: int,
    n_heads: int,
    *,
    mean: Float[Array, "L H d"] | None = None,
) -> dict[str, Edit]:
    """Edits setting the chosen heads' outputs (``{layer: [head, ...]}`` or an ``(L, H)`` mask) to zero, or
    to ``mean`` (:func:`site_mean` of ``layers.*.attn.heads`` over a reference set): mean ablation."""
    mask = heads if hasattr(heads, "shape") else unit_mask(heads, n_layers, n_heads)
    value = jnp.zeros((n_layers, 1, 1, n_heads, 1)) if mean is None else mean[:, None, None]
    return {f"layers.{ALL_LAYERS}.attn.heads": Replace(value, mask[:, None, None, :, None])}


def ablate_neurons(
    neurons: Mapping[int, Sequence[int]] | Bool[Array, "L F"],
    n_layers: int,
    n_neurons: int,
    *,
    mean: Float[Array, "L F"] | None = None,
) -> dict[str, Edit]:
    """Edits setting the chosen MLP neurons (``layers.*.mlp.hidden``) to zero or to ``mean``."""
    mask = neurons if hasattr(neurons, "shape") else unit_mask(neurons, n_layers, n_neurons, "neuron")
    value = jnp.zeros((n_layers, 1, 1, n_neurons)) if mean is None else mean[:, None, None]
    return {f"layers.{ALL_LAYERS}.mlp.hidden": Replace(value, mask[:, None, None, :])}


def site_mean(
    activations: Float[Array, "..."], attention_mask: Int[Array, "B T"], *, stacked: bool = False
) -> Float[Array, "..."]:
    """The mean of a read site over the real tokens of a reference batch (the value mean ablation sets):
    ``(B, T, ...) -> (...)``, or with ``stacked`` (a ``layers.*`` read) ``(L, B, T, ...) -> (L, ...)``."""
    w = (
        (attention_mask > 0).astype(activations.dtype)[None]
        if stacked
        else (attention_mask > 0).astype(activations.dtype)
    )
    w = w.reshape(w.shape + (1,) * (activations.ndim - w.ndim))
    axes = (1, 2) if stacked else (0, 1)
    return (activations * w).sum(axes) / w.sum(axes)


def patch(source: Mapping[str, Array], names: Sequence[str] | None = None) -> dict[str, Edit]:
    """Edits replacing each site in ``names`` (default: every site of ``source``) by its value in
    ``source`` (another run's ``ForwardOutput.sites``): activation patching."""
    return {name: Replace(source[name]) for name in (source if names is None else names)}


__all__ = [
    "ablate_heads",
    "ablate_neurons",
    "layer_count",
    "patch",
    "run",
    "run_decoder",
    "site_mean",
    "site_shapes",
    "unit_mask",
]
