"""Run a model while reading and editing its named sites (:mod:`jaxassoc.models.sites`): activation
patching, zero and mean ablation, steering, any function of a site. Pure functions of arrays: they jit,
vmap over the edits' arrays (e.g. one head mask per intervention), differentiate, and run sharded like
the plain forward (the edits are inputs of the same layer scan). A run that edits nothing is the plain
forward; one whose edits leave every value as it was (``Replace`` where nothing is selected) equals it
bit for bit (tested).

    ids, mask = tokenize(model, ["The nurse said that"])
    out = run(model, ids, mask, read=["layers.*.attn.heads"], edits=ablate_heads({3: [0, 5]}, L, H))
    out.logits, out.sites["layers.*.attn.heads"], out.units("layers.*.attn.heads")[(7, 2)]

``model.with_edits(edits)`` binds edits into the model instead, so that every metric runs on it;
:func:`run_parts` is the same pass from a model's pieces, for module-level jitted code.

An encoder-decoder (T5): ``run`` is its encoder's pass, :func:`run_decoder` its decoder's over given
encoder states, each stack with its own ``layers.{i}`` sites.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import InputError, ModelError
from jaxassoc.models.base import ForwardOutput, LanguageModel
from jaxassoc.models.heads import head_logits
from jaxassoc.models.sites import (
    ALL_LAYERS,
    DECODER_LAYER_SITES,
    LAYER_SITES,
    MODEL_SITES,
    Edit,
    Replace,
    SiteOps,
    merge_edits,
    split_bound,
)


def layer_count(body: Mapping, stack: str = "encoder") -> int:
    """The number of blocks of a body pytree (the leading axis of its stacked ``layers``); an
    encoder-decoder's ``stack`` ("encoder" or "decoder")."""
    blocks = body["layers"] if "layers" in body else body[stack]["blocks"]
    return int(jax.tree.leaves(blocks)[0].shape[0])


class RunOutput(NamedTuple):
    """What :func:`run` returns: the head input, the logits at every position, and the sites read by name."""

    hidden: Float[Array, "B T D"]
    """The final hidden states (the head's input: after the final norm; BERT: after the MLM transform)."""
    logits: Float[Array, "B T V"]
    """``heads.head_logits`` of ``hidden`` (soft-capped where the family caps them); unused, jit drops them."""
    sites: dict[str, Array]
    """The sites read, by name, as the model used them (after any edit)."""

    def units(self, name: str) -> dict[tuple[int, int], Array]:
        """A read site split by (layer, unit): ``layers.*.attn.heads`` -> ``{(layer, head): (B, T, d)}``,
        ``layers.*.mlp.hidden`` -> ``{(layer, neuron): (B, T)}``; a single layer's (``layers.3.attn.heads``)
        -> ``{(3, head): ...}``. ModelError for a site without units or one not read."""
        if name not in self.sites:
            raise ModelError(f"site {name!r} was not read: pass it in read=[...]; read: {sorted(self.sites)}")
        kind = name.split(".", 2)[-1]
        if kind not in UNIT_AXIS:
            raise ModelError(f"site {name!r} has no units to label: {', '.join(UNIT_AXIS)} have heads or neurons")
        x, layer = self.sites[name], name.split(".")[1]
        stack = x if layer == ALL_LAYERS else x[None]
        layers = range(stack.shape[0]) if layer == ALL_LAYERS else [int(layer)]
        axis = UNIT_AXIS[kind]
        return {
            (layer, u): jnp.take(stack[k], u, axis=axis)
            for k, layer in enumerate(layers)
            for u in range(stack.shape[axis + 1])
        }


UNIT_AXIS = {f"{a}.{s}": 2 for a in ("attn", "cross_attn") for s in ("q", "k", "v", "pattern", "heads")} | {
    "mlp.hidden": 2
}
"""The unit axis (heads, neurons) of a site with units, counted with its ``(B, T)`` axes."""


def run(
    model: LanguageModel,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    *,
    read: Sequence[str] = (),
    edits: Mapping[str, Edit] | None = None,
    start: tuple[Any, Float[Array, "B T D"]] | None = None,
) -> RunOutput:
    """The forward pass of ``model`` (what ``load_model`` returns) with ``edits`` applied at their sites (on top
    of those bound into it: ``model.with_edits``) and the sites in ``read`` returned by name, with the logits.
    Jit it over the parameters: ``jax.jit(lambda p, i, m: run(model.with_params(p), i, m, ...))``.

    ``start=(layer, resid_pre)`` resumes the pass at ``layer`` from that layer's ``resid_pre`` (read from an
    earlier run of the same input): the layers before it are skipped, not recomputed, which is exact when
    no edit touches them (a causal family: the masks and positions come from ``attention_mask``). Under
    ``vmap`` keep ``layer`` unbatched (one layer per call, e.g. ``lax.map`` over layers) or both branches run.
    An encoder-decoder's: its encoder (:func:`run_decoder` for the decoder). ModelError naming an unknown site
    (listing the valid ones) or an edit that does not fit its site."""
    out = run_parts(
        model.port, model.params["body"], input_ids, attention_mask, config=model.config, read=read, edits=edits,
        start=start,
    )  # fmt: skip
    return RunOutput(out.hidden, head_logits(model.head, out.hidden), dict(out.sites or {}))


def tokenize(model: LanguageModel, texts: Sequence[str]) -> tuple[Int[Array, "B T"], Int[Array, "B T"]]:
    """``(input_ids, attention_mask)`` of ``texts``, right-padded, tokenised as the metrics score sentences: a
    causal model's with its BOS token first, added once whatever the tokenizer's default (its EOS where it has
    no BOS: ``readouts.sentence_scores.start_token``); a masked model or encoder's with its special tokens
    (``[CLS] ... [SEP]``). InputError for a text without tokens."""
    if model.objective == "causal":
        start = model.vocab.bos_id if model.vocab.bos_id is not None else model.vocab.eos_id
        encoded = model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        encoded = [([] if start is None else [int(start)]) + list(ids) for ids in encoded]
    else:
        encoded = model.tokenizer(list(texts))["input_ids"]
    for text, ids in zip(texts, encoded):
        if not ids:
            raise InputError(f"text {text!r} has no tokens")
    T = max(len(ids) for ids in encoded)
    pad = model.vocab.pad_id if model.vocab.pad_id is not None else 0
    ids = np.full((len(encoded), T), pad, np.int32)
    mask = np.zeros((len(encoded), T), np.int32)
    for row, seq in enumerate(encoded):
        ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
    return jnp.asarray(ids), jnp.asarray(mask)


def run_parts(
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
    """:func:`run` from a model's pieces (its ``port``, a body pytree, its ``config``): the form for a module-level
    jitted function whose static arguments are ``(port, config)`` and whose traced one is the body, so it compiles
    once per configuration. Returns the forward's ``ForwardOutput`` (``hidden``, and ``sites`` read); the edits
    bound into ``body`` (``LanguageModel.with_edits``) apply too. ModelError naming an unknown site (listing the
    valid ones), an edit that does not fit its site, or a site edited both by the call and the bound edits.

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
    _, bound = split_bound(body)
    sites = SiteOps.build(layer_count(body), tuple(read), merge_edits(bound, edits), start)
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
    out = jax.eval_shape(lambda b, i, m: run_parts(port, b, i, m, config=config, read=names).sites, body, ids, ids)
    return {
        name.rsplit(".", 1)[-1] if name in MODEL_SITES else name.split(".", 2)[2]: s.shape[2:]
        for name, s in out.items()
    }


Units = Mapping[int, Sequence[int]] | Sequence[Sequence[int]]
"""Units of every layer (heads, neurons): ``{layer: [unit, ...]}`` or ``[[layer, unit], ...]`` pairs."""


def unit_mask(units: Units, n_layers: int, n_units: int, what: str = "head") -> Bool[Array, "L N"]:
    """``(layers, units)`` booleans, True at the chosen units (``{layer: [unit, ...]}`` or ``[layer, unit]``
    pairs); ModelError naming a malformed pair, or a layer or unit out of range."""
    if isinstance(units, Mapping):
        by_layer = {int(layer): [(int(u), f"{what} {u} of layer {layer}") for u in us] for layer, us in units.items()}
    else:
        by_layer = {}
        for pair in units:
            if len(pair) != 2:
                raise ModelError(f"a {what} is a [layer, {what}] pair, got {list(pair)!r}")
            layer, unit = (int(x) for x in pair)
            by_layer.setdefault(layer, []).append((unit, f"{what} {[layer, unit]}: {what} {unit}"))
    mask = np.zeros((n_layers, n_units), bool)
    for layer, chosen in by_layer.items():
        if not 0 <= layer < n_layers:
            raise ModelError(f"{what}s of layer {layer}: layer {layer} is out of range; this model has layers "
                             f"0..{n_layers - 1}")  # fmt: skip
        for unit, shown in chosen:
            if not 0 <= unit < n_units:
                raise ModelError(f"{shown} is out of range; each layer has {what}s 0..{n_units - 1}")
            mask[layer, unit] = True
    return jnp.asarray(mask)


def ablate_heads(
    heads: Units | Bool[Array, "L H"],
    n_layers: int,
    n_heads: int,
    *,
    mean: Float[Array, "L H d"] | None = None,
) -> dict[str, Edit]:
    """Edits setting the chosen heads' outputs (:data:`Units` or an ``(L, H)`` mask) to zero, or
    to ``mean`` (:func:`site_mean` of ``layers.*.attn.heads`` over a reference set): mean ablation."""
    return _set_units("attn.heads", heads, n_layers, n_heads, mean, "head", trailing=1)


def ablate_neurons(
    neurons: Units | Bool[Array, "L F"],
    n_layers: int,
    n_neurons: int,
    *,
    mean: Float[Array, "L F"] | None = None,
) -> dict[str, Edit]:
    """Edits setting the chosen MLP neurons (``layers.*.mlp.hidden``) to zero or to ``mean``."""
    return _set_units("mlp.hidden", neurons, n_layers, n_neurons, mean, "neuron", trailing=0)


def _set_units(kind: str, units, n_layers: int, n_units: int, mean, what: str, trailing: int) -> dict[str, Edit]:
    """``layers.*.<kind>`` set to 0 (or ``mean``, per layer and unit) at the chosen units, whose axis comes
    after ``(B, T)`` with ``trailing`` axes after it (a head's ``d``)."""
    mask = units if hasattr(units, "shape") else unit_mask(units, n_layers, n_units, what)
    after = (1,) * trailing
    value = jnp.zeros((n_layers, 1, 1, n_units, *after)) if mean is None else mean[:, None, None]
    return {f"layers.{ALL_LAYERS}.{kind}": Replace(value, mask.reshape(n_layers, 1, 1, n_units, *after))}


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
    "RunOutput",
    "ablate_heads",
    "ablate_neurons",
    "layer_count",
    "patch",
    "run",
    "run_decoder",
    "run_parts",
    "site_mean",
    "site_shapes",
    "tokenize",
    "unit_mask",
]
