"""Low-rank adapters (LoRA; Hu et al. 2022, eq. 3) on a model's named projections.

A projection ``h = x W + b`` (:class:`~jaxassoc.models.linear.Linear`) with an adapter computes
``h = x W + b + s (x A) B`` with ``A`` ``(in, r)``, ``B`` ``(r, out)`` and ``s = alpha / r`` (peft's
``scaling``), ``B`` zero at the start so the adapted model starts as the base model. The adapter is a
sub-module ``lora`` of its ``Linear`` (state ``{"a", "b", "scale"}``), stacked on the layer axis like the
weight it adapts, so it lives in the body pytree beside that weight (``params["body"]["layers"]["attn"]["q"]
["lora"]``): every forward pass, cached decoding, packing, site read or edit and mesh placement runs the
adapted model unchanged. ``scale`` is ``(layers,)``: ``s`` on the adapted layers, 0 on the others, so a
layer subset is a mask, not a ragged stack. The base weights are neither copied nor changed; training
differentiates ``a`` and ``b`` only (:func:`trainable`, :func:`with_trainable`).

Projections are named within a block: ``attn.q``, ``attn.k``, ``attn.v``, ``attn.o``, ``mlp.up``,
``mlp.gate``, ``mlp.down`` (T5's decoder also ``cross_attn.*``; an encoder-decoder's name covers both of its
stacks). A mixture of experts' ``mlp.*`` and the router are not adapted (they are not plain projections).

:func:`merged` folds the adapters into the weights (``W + s A B``), so ``model.save`` writes a Hugging Face
checkpoint that transformers loads without peft.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Float, PRNGKeyArray

from jaxassoc.errors import ConfigError
from jaxassoc.models.layers import HEAD_AXES, zeros
from jaxassoc.models.linear import Linear
from jaxassoc.models.mlp import MoE
from jaxassoc.models.precision import matmul
from jaxassoc.models.sites import split_bound

LORA = "lora"
"""The attribute of a ``Linear`` (and the key of its state) that holds its adapter."""
STACKS = ("layers", "blocks")
"""The keys under which a body stacks its blocks (causal and masked bodies: ``layers``; T5's stacks: ``blocks``)."""
TRAINED = ("a", "b")
"""The adapter's trained arrays; ``scale`` is fixed."""


class LoRA(nnx.Module):
    """The adapter of one ``Linear`` (all its stacked layers): ``s (x A) B``; ``axes``: the adapted weight's
    logical axes, which ``A``'s input and ``B``'s output dimensions take (so they shard as the weight does)."""

    def __init__(self, n_in: int, n_out: int, rank: int, *, axes, heads: int | None, lead: tuple[int, ...]):
        self.a = zeros(n_in, rank, axes=(axes[0], None), heads=heads if axes[0] in HEAD_AXES else None, lead=lead)
        self.b = zeros(rank, n_out, axes=(None, axes[1]), heads=heads if axes[1] in HEAD_AXES else None, lead=lead)
        self.scale = zeros(axes=(), lead=lead)

    def __call__(self, x: Float[Array, "... I"]) -> Float[Array, "... O"]:
        """``s (x A) B`` in ``x``'s dtype, the products under the precision policy of ``A`` and ``B``'s dtype."""
        return matmul(matmul(x, self.a[...]), self.b[...]) * self.scale[...].astype(x.dtype)


@dataclasses.dataclass(frozen=True)
class LoRASpec:
    """Which projections get adapters and how large: ``rank`` r, ``alpha`` (``s = alpha / r``), ``targets``
    (projection names, see the module docstring) and ``layers`` (indices, or None: every layer)."""

    rank: int = 8
    alpha: float = 16.0
    targets: tuple[str, ...] = ("attn.q", "attn.v")
    layers: tuple[int, ...] | None = None

    @property
    def scaling(self) -> float:
        return self.alpha / self.rank


def projections(module: nnx.Module) -> dict[str, list[tuple[tuple[str, ...], nnx.Module]]]:
    """Projection name (``attn.q``) -> the ``(path, Linear)`` pairs of a body module that it names, one per
    stack (T5: encoder and decoder); only projections called as ``x W + b`` (not a mixture's experts)."""
    found: dict[str, list] = {}
    parents = {}
    for path, node in nnx.iter_graph(module):
        parents[tuple(path)] = node
    for path, node in parents.items():
        if not isinstance(node, Linear) or len(path) < 2:
            continue
        stack = next((i for i, k in enumerate(path) if k in STACKS), None)
        if stack is None or isinstance(parents.get(path[:-1]), MoE):
            continue
        found.setdefault(".".join(map(str, path[stack + 1 :])), []).append((tuple(map(str, path)), node))
    return found


def check_spec(spec: LoRASpec, module: nnx.Module, family: str) -> dict[str, list]:
    """The projections ``spec`` adapts (as :func:`projections`); ConfigError naming a rank out of range, an
    unknown projection (listing the family's) or a layer out of range."""
    found = projections(module)
    if not spec.targets:
        raise ConfigError("LoRA needs at least one projection to adapt (e.g. targets: attn.q, attn.v)")
    missing = [t for t in spec.targets if t not in found]
    if missing:
        raise ConfigError(
            f"the {family} family has no projection {missing[0]!r} to adapt; its projections: {sorted(found)}"
        )
    for target in spec.targets:
        for path, linear in found[target]:
            n_in, n_out = linear.w.shape[-2:]
            if not 0 < spec.rank <= min(n_in, n_out):
                raise ConfigError(
                    f"LoRA rank {spec.rank} for {target} ({n_in} -> {n_out}): the rank must be in 1..{min(n_in, n_out)}"
                )
    depth = max(linear.w.shape[0] for t in spec.targets for _, linear in found[t])  # T5: its deeper stack's
    if spec.layers is not None and not spec.layers:
        raise ConfigError("LoRA layers=[] adapts nothing: list the layers to adapt, or null for every layer")
    for layer in spec.layers or ():
        if not 0 <= layer < depth:
            raise ConfigError(f"LoRA layer {layer} is out of range: this model has layers 0..{depth - 1}")
    return {t: found[t] for t in spec.targets}


def _get(tree: Mapping, path: Sequence[str]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _set(tree: Mapping, path: Sequence[str], value: Any) -> dict:
    """A copy of the nested dict ``tree`` with ``value`` at ``path`` (the other branches shared, not copied)."""
    if not path:
        return value
    return {**tree, path[0]: _set(tree.get(path[0], {}), path[1:], value)}


def adapter_paths(body: Mapping) -> tuple[tuple[str, ...], ...]:
    """The paths of the ``Linear`` modules of a body pytree that hold an adapter (sorted)."""
    out = []

    def walk(tree, path):
        for key, value in tree.items():
            if key == LORA:
                out.append(path)
            elif isinstance(value, Mapping):
                walk(value, (*path, key))

    walk(split_bound(body)[0], ())
    return tuple(sorted(out))


def attach(module: nnx.Module, paths: Sequence[tuple[str, ...]], rank: int = 1) -> nnx.Module:
    """``module`` (a body, typically abstract) with an adapter sub-module of ``rank`` on each ``Linear`` at
    ``paths``: the structure of a body pytree that holds adapters (``Family.body_module``)."""
    for path in paths:
        linear = functools.reduce(getattr, path, module)
        n_in, n_out = linear.w.shape[-2:]
        meta = linear.w.get_metadata()
        axes = tuple(meta["out_sharding"])
        lead = tuple(linear.w.shape[:-2])
        setattr(linear, LORA, nnx.eval_shape(lambda: LoRA(n_in, n_out, rank, axes=axes[len(lead):],
                                                          heads=meta.get("heads"), lead=lead)))  # fmt: skip
    return module


def add_adapters(model: Any, spec: LoRASpec, key: PRNGKeyArray) -> Any:
    """``model`` (a ``LanguageModel``) with fresh adapters on ``spec``'s projections: ``A`` uniform in
    ``±1/sqrt(in)`` (peft's default: Kaiming-uniform with a = sqrt(5)), ``B`` zero, so the adapted model's
    outputs equal the base model's bit for bit; float32 (the master copy), replicated or sharded as the weights
    over the model's mesh. Replaces adapters already there. ConfigError for a bad spec (:func:`check_spec`)."""
    chosen = check_spec(spec, model.port.abstract_body(model.config), model.family)
    adapters = {}
    keys = iter(jax.random.split(key, sum(len(v) for v in chosen.values())))
    for found in chosen.values():
        for path, linear in found:
            n_in, n_out = linear.w.shape[-2:]
            lead = tuple(linear.w.shape[:-2])
            bound = 1.0 / np.sqrt(n_in)
            a = jax.random.uniform(next(keys), (*lead, n_in, spec.rank), jnp.float32, -bound, bound)
            scale = np.zeros(lead, np.float32)
            scale[slice(None) if spec.layers is None else [i for i in spec.layers if i < lead[0]]] = spec.scaling
            b = jnp.zeros((*lead, spec.rank, n_out), jnp.float32)
            adapters[path] = {"a": a, "b": b, "scale": jnp.asarray(scale)}
    return with_adapters(without_adapters(model), adapters)


def adapters(model: Any) -> dict[tuple[str, ...], dict[str, Array]]:
    """The adapters of ``model``: the path of each adapted ``Linear`` in the body -> ``{"a", "b", "scale"}``."""
    body = split_bound(model.params["body"])[0]
    return {path: dict(_get(body, path)[LORA]) for path in adapter_paths(body)}


def with_adapters(model: Any, found: Mapping[tuple[str, ...], Mapping[str, Array]]) -> Any:
    """``model`` with the adapters ``found`` (path -> ``{"a", "b", "scale"}``, as :func:`adapters` gives) in its
    body, placed over its mesh as their weights are; the weights themselves shared, not copied."""
    body = model.params["body"]
    if model.mesh is not None:
        found = place(model, found)
    for path, adapter in found.items():
        body = _set(body, (*path, LORA), dict(adapter))
    return model.with_params({**model.params, "body": body})


def place(model: Any, found: Mapping[tuple[str, ...], Mapping[str, Array]]) -> dict:
    """Adapters sharded over ``model.mesh`` by their logical axes (``A``'s input and ``B``'s output dimension as
    the adapted weight's)."""
    from jaxassoc.models.mesh import module_axes, place_params

    paths = tuple(sorted(found))
    table = module_axes(attach(model.port.abstract_body(model.config), paths), model.port.name)
    # keyed by the arrays' full names (body/layers/attn/k/lora/b), so a replication is logged under them, not
    # under a name that reads as a bias (layers/attn/k/b)
    tree = {"/".join(("body", *p, LORA)): dict(v) for p, v in found.items()}
    placed = place_params(tree, {f"{k}/{n}": table[f"{k}/{n}"] for k in tree for n in tree[k]}, model.mesh)
    return {tuple(k.split("/")[1:-1]): v for k, v in placed.items()}


def without_adapters(model: Any) -> Any:
    """``model`` without its adapters (the base model; itself when it has none)."""
    body = model.params["body"]
    return model if not adapter_paths(body) else model.with_params({**model.params, "body": stripped(body)})


def stripped(body: Mapping) -> dict:
    """A body pytree without its adapters (the base body; the weights shared, not copied)."""
    for path in adapter_paths(body):
        body = _set(body, path, {k: v for k, v in _get(body, path).items() if k != LORA})
    return body


def trainable(model: Any) -> dict[str, dict[str, Array]]:
    """The trained arrays of ``model``'s adapters (``"layers/attn/q"`` -> ``{"a", "b"}``): the pytree an
    optimiser updates (string keys, so checkpoints name them)."""
    return {"/".join(p): {k: v[k] for k in TRAINED} for p, v in adapters(model).items()}


def with_trainable(model: Any, params: Mapping[str, Mapping[str, Array]], dtype: Any = None) -> Any:
    """``model`` with its adapters' ``a`` and ``b`` replaced by ``params`` (as :func:`trainable` gives them),
    cast to ``dtype`` (:func:`inserted`)."""
    return model.with_params({**model.params, "body": inserted(model.params["body"], params, dtype)})


def inserted(body: Mapping, params: Mapping[str, Mapping[str, Array]], dtype: Any = None) -> dict:
    """A body pytree holding adapters with their ``a`` and ``b`` replaced by ``params`` (:func:`trainable`'s
    form), cast to ``dtype`` (None: as given; the weights' dtype for mixed-precision compute from float32 master
    copies, the gradient flowing back through the cast). Usable inside ``jit`` and ``grad``."""
    for name, arrays in params.items():
        path = (*name.split("/"), LORA)
        new = {k: (v if dtype is None else v.astype(dtype)) for k, v in arrays.items()}
        body = _set(body, path, {**_get(body, path), **new})
    return body


def merged(model: Any) -> Any:
    """``model`` with each adapter folded into its weight, ``W + s A B`` (in float32, rounded once to the
    weight's dtype), and the adapters removed: the model ``model.save`` writes as a plain checkpoint."""
    body = model.params["body"]
    for path, adapter in adapters(model).items():
        linear = _get(body, path)
        w = linear["w"]
        a, b = adapter["a"].astype(jnp.float32), adapter["b"].astype(jnp.float32)
        s = adapter["scale"].astype(jnp.float32)[..., None, None]
        delta = jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST) * s
        body = _set(body, path, {**{k: v for k, v in linear.items() if k != LORA}, "w": (w + delta).astype(w.dtype)})
    folded = identity(model.params["body"])
    if not folded:
        return model
    # other weights than the files': a weights hash of their own (the base's and the folded adapters'), so the
    # merged model's fingerprint (the cache identity of its results) is neither the base model's nor the
    # adapted one's (the same outputs, up to rounding, but not the same arrays)
    weights = json.dumps([model.provenance.weights_sha256, folded], sort_keys=True)
    provenance = dataclasses.replace(model.provenance, weights_sha256=hashlib.sha256(weights.encode()).hexdigest())
    return dataclasses.replace(model.with_params({**model.params, "body": body}), provenance=provenance)


def identity(body: Mapping) -> dict[str, list]:
    """The adapters of a body pytree as JSON: per path, each array's dtype, shape and bytes' sha256 (part of a
    model's fingerprint, so results of an adapted model never share a cache entry with the base model's)."""
    out = {}
    for path in adapter_paths(body):
        arrays = _get(body, path)[LORA]
        out["/".join(path)] = [
            [k, str(np.asarray(v).dtype), list(np.shape(v)), hashlib.sha256(np.asarray(v).tobytes()).hexdigest()]
            for k, v in sorted(arrays.items())
        ]
    return out


def count(model: Any) -> int:
    """Trained parameters of ``model``'s adapters, counting only the adapted layers (``scale != 0``)."""
    total = 0
    for adapter in adapters(model).values():
        active = np.asarray(adapter["scale"]) != 0
        per_layer = adapter["a"][(0,) * active.ndim].size + adapter["b"][(0,) * active.ndim].size
        total += int(active.sum()) * per_layer
    return total


__all__ = [
    "LORA",
    "LoRA",
    "LoRASpec",
    "adapter_paths",
    "adapters",
    "add_adapters",
    "attach",
    "check_spec",
    "count",
    "identity",
    "inserted",
    "merged",
    "place",
    "projections",
    "stripped",
    "trainable",
    "with_adapters",
    "with_trainable",
    "without_adapters",
]
