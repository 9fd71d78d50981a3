"""Zero ablation of named attention heads and MLP neurons bound into a model (``intervention=ablate``;
docs/models.md "Named sites"): one case of :meth:`~jaxassoc.models.base.LanguageModel.with_edits`, with the
masks of :func:`~jaxassoc.models.interventions.ablate_heads` / ``ablate_neurons``, so that every metric runs on
the ablated model unchanged and its cache identity is the model's :meth:`fingerprint`.
"""

from __future__ import annotations

from typing import Iterable

from jaxassoc.errors import ModelError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.interventions import ablate_heads, ablate_neurons, layer_count, site_shapes
from jaxassoc.models.sites import Edit


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
    heads, neurons = [list(p) for p in heads], [list(p) for p in neurons]
    if neurons and len(shapes["mlp.hidden"]) != 1:
        raise ModelError(f"{model.name!r} has a mixture of experts: its neurons are per expert, not ablated by index")
    edits: dict[str, Edit] = {}
    if heads:
        edits.update(ablate_heads(heads, n_layers, shapes["attn.heads"][0]))
    if neurons:
        edits.update(ablate_neurons(neurons, n_layers, shapes["mlp.hidden"][-1]))
    return model.with_edits(edits)


def label(heads: Iterable = (), neurons: Iterable = ()) -> str:
    """E.g. ``heads 3.1 5.0; neurons 2.17`` (layer.unit, sorted, each once)."""
    parts = [
        f"{what} " + " ".join(f"{layer}.{unit}" for layer, unit in sorted({(int(a), int(b)) for a, b in units}))
        for what, units in (("heads", heads), ("neurons", neurons))
        if units
    ]
    return "; ".join(parts) or "nothing"


__all__ = ["ablated", "label"]
