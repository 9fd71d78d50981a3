"""Zero ablation of named attention heads and MLP neurons, bound into a model's forward pass so that every
metric runs on the ablated model unchanged (``intervention=ablate``; docs/models.md "Named sites").

An :class:`Ablation` is hashable: it is a static argument of the jitted forward (``base.Forward``) and of the
cached decoder step (``base.Decoder``), so an ablated model compiles once per ablation, and its edits are
the constant masks of :func:`~jaxassoc.models.interventions.ablate_heads` / ``ablate_neurons``.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import jax.numpy as jnp
import numpy as np

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Decoder, Forward, LanguageModel
from jaxassoc.models.interventions import ablate_heads, ablate_neurons, layer_count, site_shapes
from jaxassoc.models.sites import Edit

Units = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Ablation:
    """The (layer, head) pairs and (layer, neuron) pairs set to zero in a model of ``n_layers`` layers with
    ``n_heads`` heads and ``n_neurons`` MLP neurons per layer."""

    heads: Units
    neurons: Units
    n_layers: int
    n_heads: int
    n_neurons: int

    def edits(self) -> dict[str, Edit]:
        """The site edits: ``layers.*.attn.heads`` and/or ``layers.*.mlp.hidden`` set to 0 where chosen."""
        out: dict[str, Edit] = {}
        if self.heads:
            out.update(
                ablate_heads(jnp.asarray(_mask(self.heads, self.n_layers, self.n_heads)), self.n_layers, self.n_heads)
            )
        if self.neurons:
            mask = jnp.asarray(_mask(self.neurons, self.n_layers, self.n_neurons))
            out.update(ablate_neurons(mask, self.n_layers, self.n_neurons))
        return out

    @property
    def label(self) -> str:
        """E.g. ``heads 3.1 5.0; neurons 2.17`` (layer.unit)."""
        parts = [f"{what} " + " ".join(f"{layer}.{unit}" for layer, unit in units) for what, units in
                 (("heads", self.heads), ("neurons", self.neurons)) if units]  # fmt: skip
        return "; ".join(parts) or "nothing"


def _mask(units: Units, n_layers: int, n_units: int) -> np.ndarray:
    mask = np.zeros((n_layers, n_units), bool)
    for layer, unit in units:
        mask[layer, unit] = True
    return mask


def _units(pairs: Iterable, what: str, n_layers: int, n_units: int) -> Units:
    out = []
    for pair in pairs:
        if len(pair) != 2:
            raise ModelError(f"a {what} to ablate is a [layer, {what}] pair, got {list(pair)!r}")
        layer, unit = (int(x) for x in pair)
        if not 0 <= layer < n_layers:
            raise ModelError(
                f"{what} {list(pair)}: layer {layer} is out of range; this model has layers 0..{n_layers - 1}"
            )
        if not 0 <= unit < n_units:
            raise ModelError(
                f"{what} {list(pair)}: {what} {unit} is out of range; each layer has {what}s 0..{n_units - 1}"
            )
        out.append((layer, unit))
    return tuple(sorted(set(out)))


def ablated(model: LanguageModel, heads: Iterable = (), neurons: Iterable = ()) -> LanguageModel:
    """``model`` with the given heads (``[layer, head]`` pairs) and MLP neurons (``[layer, neuron]``) zeroed
    in every forward pass, cached or not; ModelError naming an index out of range, or a seq2seq model."""
    if model.objective == "seq2seq":
        raise ModelError(
            f"{model.name!r} is an encoder-decoder ({model.family}) model: it has no named sites to ablate"
        )
    body = model.params["body"]
    shapes = site_shapes(model.port, body, config=model.config)
    n_layers = layer_count(body)
    n_neurons = shapes["mlp.hidden"][-1]
    neuron_units = _units(neurons, "neuron", n_layers, n_neurons)
    if neuron_units and len(shapes["mlp.hidden"]) != 1:
        raise ModelError(f"{model.name!r} has a mixture of experts: its neurons are per expert, not ablated by index")
    ablation = Ablation(_units(heads, "head", n_layers, shapes["attn.heads"][0]), neuron_units, n_layers,
                        shapes["attn.heads"][0], n_neurons)  # fmt: skip
    decoder = None if model.decoder is None else Decoder(model.port, model.config, ablation)
    return dataclasses.replace(
        model, forward=Forward(model.port, model.config, ablation), decoder=decoder, ablation=ablation
    )


__all__ = ["Ablation", "ablated"]
