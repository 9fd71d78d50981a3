"""Named sites inside a model: where an activation can be read and replaced during the forward pass (the
mediators of Vig et al. 2020's causal mediation analysis; docs/models.md "Named sites").

One naming scheme for every family (``D`` model width, ``H`` query heads and ``G`` key/value heads of ``d``
dimensions, ``S`` keys, ``F`` MLP width), in the order a block meets them:

- ``layers.{i}.resid_pre`` ``(B, T, D)``: the residual stream entering block ``i`` (block 0: the embeddings);
- ``layers.{i}.attn.in`` ``(B, T, D)``: the attention sublayer's input, normalised (a post-norm block's: the
  stream itself); where concept erasure acts layer by layer;
- ``layers.{i}.attn.q`` ``(B, T, H, d)``, ``attn.k`` / ``attn.v`` ``(B, T, G, d)``: the queries, keys and values
  as attention uses them (after any q/k norm and rotary embedding; the new tokens' in a cached step);
- ``layers.{i}.attn.pattern`` ``(B, T, H, S)``: each head's attention weights, query by key (after the softmax);
- ``layers.{i}.attn.heads`` ``(B, T, H, d)``: each attention head's output before the output projection;
- ``layers.{i}.attn.out`` ``(B, T, D)``: the attention sublayer's output as the residual stream receives it
  (after the output projection; Gemma: after its post-attention norm);
- ``layers.{i}.resid_mid`` ``(B, T, D)``: the stream entering the MLP sublayer (``resid_pre + attn.out``; a
  post-norm block's: after its norm; parallel attention and MLP: ``resid_pre + attn.out``, the MLP reading
  ``resid_pre``, so ``resid_post = resid_mid + mlp.out``);
- ``layers.{i}.mlp.in`` ``(B, T, D)``: the MLP's input, normalised;
- ``layers.{i}.mlp.hidden`` ``(B, T, F)``: the MLP's hidden activations, its neurons (``act(up x)``; gated:
  ``act(gate x) * up x``; a mixture of experts: ``(B, T, E, F)``, each expert's scaled by its routing weight);
- ``layers.{i}.mlp.out`` ``(B, T, D)``: the MLP sublayer's output as the residual stream receives it;
- ``layers.{i}.resid_post`` ``(B, T, D)``: the block's output (= ``layers.{i+1}.resid_pre``);
- ``final_norm`` ``(B, T, D)``: the head's input (after the final norm; BERT: after the MLM transform);
- ``layers.*.{kind}``: that site in every layer, stacked on a leading layer axis ``(L, ...)``.

An encoder-decoder (T5) has these sites in each stack: ``interventions.run`` reads its encoder,
``interventions.run_decoder`` its decoder, whose blocks also have the cross-attention's ``cross_attn.in``,
``cross_attn.q`` / ``k`` / ``v`` (keys and values of the encoder's states), ``cross_attn.pattern``,
``cross_attn.heads`` and ``cross_attn.out``, after the self-attention's ``attn.out`` and before ``resid_mid``
(:data:`DECODER_LAYER_SITES`).

A :class:`Tap` is what the body calls at each site; :class:`SiteOps` builds one per layer inside the layer
scan from the requested reads and edits, so reading costs no second forward and an edit of ``layers.*``
sites enters the scan as a stacked input.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxassoc.errors import ModelError

ATTENTION_SITES = ("in", "q", "k", "v", "pattern", "heads", "out")
"""The sites of an attention sublayer, after its prefix (``attn``, ``cross_attn``)."""
LAYER_SITES = (
    "resid_pre",
    *(f"attn.{s}" for s in ATTENTION_SITES),
    "resid_mid",
    "mlp.in",
    "mlp.hidden",
    "mlp.out",
    "resid_post",
)
"""The sites of every block, in the order the forward pass meets them."""
DECODER_LAYER_SITES = (*LAYER_SITES[:8], *(f"cross_attn.{s}" for s in ATTENTION_SITES), *LAYER_SITES[8:])
"""The sites of an encoder-decoder's decoder blocks: self attention, cross attention, MLP."""
MODEL_SITES = ("final_norm",)
"""The sites outside the blocks."""
ALL_LAYERS = "*"
EDITS = "edits"
"""The key of a body pytree under which the edits bound into a model live (``LanguageModel.with_edits``): their
arrays travel with the weights through every forward, cached decoding, packing and mesh placement."""


class Site(NamedTuple):
    """A parsed site name: ``kind`` (one of :data:`LAYER_SITES` or :data:`MODEL_SITES`) and ``layer`` (an
    index, :data:`ALL_LAYERS`, or None for a model site)."""

    kind: str
    layer: int | str | None

    @property
    def name(self) -> str:
        return self.kind if self.layer is None else f"layers.{self.layer}.{self.kind}"


def site_names(n_layers: int, kinds: tuple[str, ...] = LAYER_SITES) -> list[str]:
    """Every site of a stack of ``n_layers`` blocks with sites ``kinds``, in forward order."""
    return [f"layers.{i}.{kind}" for i in range(n_layers) for kind in kinds] + list(MODEL_SITES)


def parse_site(name: str, n_layers: int, kinds: tuple[str, ...] = LAYER_SITES) -> Site:
    """The :class:`Site` of a name (blocks with sites ``kinds``); ModelError naming it and the valid names
    otherwise."""
    if name in MODEL_SITES:
        return Site(name, None)
    parts = name.split(".", 2)
    if len(parts) == 3 and parts[0] == "layers" and parts[2] in kinds:
        if parts[1] == ALL_LAYERS:
            return Site(parts[2], ALL_LAYERS)
        if parts[1].isdigit():
            layer = int(parts[1])
            if layer < n_layers:
                return Site(parts[2], layer)
            raise ModelError(f"site {name!r}: layer {layer} is out of range; this model has layers 0..{n_layers - 1}")
    raise ModelError(
        f"unknown site {name!r}; valid sites: layers.<i>.{{{', '.join(kinds)}}} for i in 0..{n_layers - 1}, "
        f"layers.*.<kind> (every layer, stacked), {', '.join(MODEL_SITES)}"
    )


class Replace(NamedTuple):
    """Set the site to ``value`` where ``where`` holds (None: everywhere). Both broadcast to the site's shape
    (a ``layers.*`` site: with the layer axis first). Patching, zero and mean ablation are Replaces."""

    value: Float[Array, "..."]
    where: Bool[Array, "..."] | None = None


class Add(NamedTuple):
    """Add ``delta`` (broadcast to the site) to the site: steering, and the zero perturbation whose gradient
    is the metric's gradient at the site (:mod:`jaxassoc.models.attribution`)."""

    delta: Float[Array, "..."]


@jax.tree_util.register_static
@dataclasses.dataclass(frozen=True)
class Apply:
    """Replace the site ``x`` by ``fn(x)`` (a ``layers.*`` site: ``fn(x, layer)`` with the traced layer
    index). ``fn`` is static: a new function compiles anew."""

    fn: Callable[..., Array]


class Transform(NamedTuple):
    """Replace the site ``x`` by ``module(x)``, where ``module`` is a callable pytree (a concept eraser,
    :class:`jaxassoc.mitigation.Eraser`): its arrays are traced, so new arrays of the same shapes reuse the
    compiled pass, and they are differentiable. A ``layers.*`` site: every array has a leading layer axis,
    and each layer calls its slice."""

    module: Any


Edit = Replace | Add | Apply | Transform


def _edit(edit: Edit, x: Array, site: Site, layer: Array | None = None) -> Array:
    """``x`` as ``edit`` leaves it; ModelError naming the site when the edit's arrays do not fit it."""
    if isinstance(edit, Apply):
        out = edit.fn(x) if layer is None else edit.fn(x, layer)
        _check_shape(out, x, site, "the function's output")
        return out.astype(x.dtype)
    if isinstance(edit, Transform):
        try:
            out = edit.module(x)
        except (TypeError, ValueError) as e:  # e.g. an eraser fitted on states of another width
            raise ModelError(
                f"site {site.name!r}: the {type(edit.module).__name__} does not fit the site's shape {x.shape} "
                f"({e})" + (" (per layer, after the leading layer axis)" if site.layer == ALL_LAYERS else "")
            ) from None
        _check_shape(out, x, site, f"the {type(edit.module).__name__}'s output")
        return out.astype(x.dtype)
    if isinstance(edit, Add):
        _check_shape(edit.delta, x, site, "delta")
        return x + edit.delta.astype(x.dtype)
    if not isinstance(edit, Replace):
        raise ModelError(
            f"site {site.name!r}: an edit is a sites.Replace, Add, Apply or Transform, not {type(edit).__name__}"
        )
    _check_shape(edit.value, x, site, "value")
    value = jnp.broadcast_to(edit.value.astype(x.dtype), x.shape)
    if edit.where is None:
        return value
    _check_shape(edit.where, x, site, "where")
    return jnp.where(edit.where, value, x)


def _check_shape(array: Any, x: Array, site: Site, what: str) -> None:
    shape = jnp.shape(array)
    try:
        broadcast = jnp.broadcast_shapes(shape, x.shape)
    except ValueError:
        broadcast = None
    if broadcast != x.shape:
        raise ModelError(
            f"site {site.name!r}: {what} of shape {shape} does not broadcast to the site's shape {x.shape}"
            + (" (per layer, after the leading layer axis)" if site.layer == ALL_LAYERS else "")
        )


def _layer_slice(edit: Edit, site: Site, n_layers: int) -> Edit:
    """Check the leading layer axis of a ``layers.*`` edit's arrays (sliced by the scan)."""
    for leaf in jax.tree.leaves(edit):
        if jnp.ndim(leaf) == 0 or jnp.shape(leaf)[0] != n_layers:
            raise ModelError(
                f"site {site.name!r}: an edit of every layer needs arrays with a leading layer axis of "
                f"{n_layers}, got shape {jnp.shape(leaf)}"
            )
    return edit


class Tap:
    """What a body calls at each site of one layer: ``tap(kind, x)`` applies that site's edits and records it
    if read. ``records`` holds the recorded sites of this layer (the scan's per-layer output)."""

    def __init__(self, ops: "SiteOps", index: Array, stacked: Mapping[str, Edit]):
        self.ops, self.index, self.stacked = ops, index, stacked
        self.records: dict[str, Array] = {}

    def wants(self, kind: str) -> bool:
        """Whether this run reads or edits the site ``kind`` (a body may skip the work of exposing it)."""
        return kind in self.ops.read_kinds or kind in self.ops.single or kind in self.stacked

    def __call__(self, kind: str, x: Array) -> Array:
        for layer, edit in self.ops.single.get(kind, ()):
            x = jnp.where(self.index == layer, _edit(edit, x, Site(kind, layer)), x)
        if kind in self.stacked:
            x = _edit(self.stacked[kind], x, Site(kind, ALL_LAYERS), self.index)
        if kind in self.ops.read_kinds:
            self.records[kind] = x
        return x


@dataclasses.dataclass(frozen=True)
class SiteOps:
    """The reads and edits of one run, as the body applies them: single-layer edits by kind (applied at
    their layer with ``where(index == layer, ...)``), every-layer edits (their arrays are the scan's
    per-layer input), and which kinds the scan records."""

    n_layers: int
    reads: tuple[Site, ...]
    single: Mapping[str, tuple[tuple[int, Edit], ...]]
    stacked: Mapping[str, Edit]
    model: Mapping[str, Edit]
    start: tuple[Array, Array] | None = None
    """``(layer, resid_pre)``: resume the forward at that layer from that residual stream; the layers before
    it are skipped (a ``lax.cond`` per layer: no work when the layer index is not vmapped)."""

    @classmethod
    def build(
        cls,
        n_layers: int,
        read: tuple[str, ...] = (),
        edits: Mapping[str, Edit] | None = None,
        start: tuple[Any, Array] | None = None,
        kinds: tuple[str, ...] = LAYER_SITES,
    ) -> "SiteOps":
        """From site names (of blocks with sites ``kinds``); ModelError naming an unknown site or a malformed
        every-layer edit, or reads with ``start`` (the skipped layers have nothing to read)."""
        if start is not None and read:
            raise ModelError("a run resumed at a layer (start=...) reads no sites: the layers before it do not run")
        reads = tuple(parse_site(name, n_layers, kinds) for name in read)
        single: dict[str, list] = {}
        stacked, model = {}, {}
        for name, edit in (edits or {}).items():
            site = parse_site(name, n_layers, kinds)
            if site.layer is None:
                model[site.kind] = edit
            elif site.layer == ALL_LAYERS:
                stacked[site.kind] = _layer_slice(edit, site, n_layers)
            else:
                single.setdefault(site.kind, []).append((site.layer, edit))
        return cls(n_layers, reads, {k: tuple(v) for k, v in single.items()}, stacked, model, start)

    @property
    def read_kinds(self) -> frozenset[str]:
        return frozenset(site.kind for site in self.reads if site.layer is not None)

    def tap(self, index: Array, stacked: Mapping[str, Edit]) -> Tap:
        """The tap of the layer at (traced) ``index``, with its slice of the every-layer edits."""
        return Tap(self, index, stacked)

    def model_site(self, kind: str, x: Array, records: dict[str, Array]) -> Array:
        """Apply and record a model site (``final_norm``)."""
        if kind in self.model:
            x = _edit(self.model[kind], x, Site(kind, None))
        records[kind] = x
        return x

    def collect(self, per_layer: Mapping[str, Array], model: Mapping[str, Array]) -> dict[str, Array]:
        """The requested reads by name from the scan's stacked records and the model sites."""
        out = {}
        for site in self.reads:
            if site.layer is None:
                out[site.name] = model[site.kind]
            elif site.layer == ALL_LAYERS:
                out[site.name] = per_layer[site.kind]
            else:
                out[site.name] = per_layer[site.kind][site.layer]
        return out


def split_bound(body: Mapping) -> tuple[Mapping, Mapping[str, Edit]]:
    """``(the body's weights, the edits bound into it)`` (``{}``: none)."""
    if EDITS not in body:
        return body, {}
    return {k: v for k, v in body.items() if k != EDITS}, body[EDITS]


def with_bound(sites: "SiteOps | None", body: Mapping, kinds: tuple[str, ...] = LAYER_SITES) -> "SiteOps | None":
    """The site operations of a pass over ``body``: ``sites`` as given when it is not None (built by
    :func:`jaxassoc.models.interventions.run_parts`, which merges the bound edits in), else the bound edits
    alone, else None (the plain forward)."""
    _, bound = split_bound(body)
    if sites is not None or not bound:
        return sites
    blocks = body["layers"] if "layers" in body else body["encoder"]["blocks"]
    return SiteOps.build(int(jax.tree.leaves(blocks)[0].shape[0]), (), bound, kinds=kinds)


def merge_edits(bound: Mapping[str, Edit], edits: Mapping[str, Edit] | None) -> dict[str, Edit]:
    """The bound edits then a call's own; ModelError for a site both edit (say which to keep: unbind the
    model's with ``model.with_edits({})``)."""
    both = sorted(set(bound) & set(edits or {}))
    if both:
        raise ModelError(
            f"site {both[0]!r} is edited by the model's bound edits (model.with_edits) and by this call; edit it "
            "once: pass the combined edit, or call model.with_edits({}) for the model without its edits"
        )
    return {**bound, **(edits or {})}


def tap_site(tap: Tap | None, kind: str, x: Array) -> Array:
    """``tap(kind, x)``, or ``x`` untouched without a tap (the plain forward's trace is unchanged)."""
    return x if tap is None else tap(kind, x)


__all__ = [
    "ALL_LAYERS",
    "EDITS",
    "DECODER_LAYER_SITES",
    "Add",
    "Apply",
    "Edit",
    "LAYER_SITES",
    "MODEL_SITES",
    "Replace",
    "Site",
    "SiteOps",
    "Tap",
    "parse_site",
    "merge_edits",
    "site_names",
    "split_bound",
    "tap_site",
    "with_bound",
]
