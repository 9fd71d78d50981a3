"""Model-parallel sharding: logical axes per weight, a device mesh, and the rules that join them.

Every weight of a port carries its LOGICAL axes as parameter metadata, declared where the module creates
it (``layers.zeros(..., axes=...)``) and read by :func:`module_axes`. :data:`RULES` map the logical
axes onto the mesh axes ``("data", "fsdp", "tp")``: FSDP shards the embedding (d_model) dimension of the
weights, tensor parallelism (TP) the heads / MLP / vocabulary dimension; the batch is split over
``("data", "fsdp")``. A dimension that its mesh axis does not divide (or whose heads it does not divide,
e.g. 3 KV heads over ``tp=4``) is replicated along that axis, and the tensors concerned are logged once.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.models.checkpoint import drop_pages

logger = logging.getLogger(__name__)

MESH_AXES = ("data", "fsdp", "tp")
BATCH_AXES = ("data", "fsdp")
RULES: dict[str, str | None] = {  # logical axis -> mesh axis (None: never sharded)
    "embed": "fsdp",
    "vocab": "tp",
    "heads": "tp",
    "kv_heads": "tp",
    "mlp": "tp",
    "layers": None,
}


class ParamAxes(NamedTuple):
    """One parameter's logical axes (one per dimension; None: never sharded) and, for a parameter with a
    ``heads`` / ``kv_heads`` axis, the number of heads that dimension holds (a head is never split)."""

    names: tuple[str | None, ...]
    heads: int | None = None


OUTPUT_HEAD_AXES = {"head/W": ParamAxes(("vocab", "embed")), "head/b": ParamAxes(("vocab",))}
"""The output head's axes (every family's head is ``Head(W (vocab, d_model), b (vocab,))``)."""


def module_axes(module: nnx.Module, what: str) -> dict[str, ParamAxes]:
    """``"body/..."`` path -> :class:`ParamAxes` of every parameter of ``module`` (e.g. an abstract body),
    read from the parameters' metadata (``layers.zeros``). ModelError naming each parameter of ``what``
    (a family) that was created without logical axes: a model is refused when it is built, not when placed."""
    table, missing = {}, []
    for path, variable in nnx.to_flat_state(nnx.state(module, nnx.Param)):
        name = "/".join(("body", *map(str, path)))
        metadata = variable.get_metadata()
        if "out_sharding" not in metadata:
            missing.append(name)
            continue
        table[name] = ParamAxes(tuple(metadata["out_sharding"]), metadata.get("heads"))
    if missing:
        raise ModelError(
            f"the {what} body declares no logical axes for its parameters {missing}: create each with "
            "layers.zeros(..., axes=...) so that it can be placed on a mesh"
        )
    return table


def make_mesh(data: int = 1, fsdp: int = 1, tp: int = 1) -> Mesh | None:
    """A ``("data", "fsdp", "tp")`` mesh over all (global) devices, ordered by (process, device id); None
    when every size is 1 (one device, no mesh). One size may be -1: all devices the others leave.

    ConfigError naming the sizes and the device count when their product is not the device count.
    """
    sizes = {"data": data, "fsdp": fsdp, "tp": tp}
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    n = len(devices)
    shown = ", ".join(f"mesh.{k}={v}" for k, v in sizes.items())
    bad = [k for k, v in sizes.items() if v == 0 or v < -1]
    if bad or list(sizes.values()).count(-1) > 1:
        raise ConfigError(
            f"mesh sizes {shown}: each must be a positive integer (at most one may be -1, "
            "meaning all devices the others leave)"
        )
    known = int(np.prod([v for v in sizes.values() if v != -1]))
    if -1 in sizes.values():
        if n % known:
            raise ConfigError(
                f"mesh sizes {shown}: {known} does not divide the {n} devices; choose sizes whose product divides {n}"
            )
        sizes = {k: (n // known if v == -1 else v) for k, v in sizes.items()}
        known = n
    if known == 1 and n >= 1 and all(v == 1 for v in sizes.values()):
        return None
    if known != n:
        raise ConfigError(
            f"mesh sizes {shown} multiply to {known} devices but there are {n} devices; choose "
            f"sizes whose product is {n} (e.g. mesh.fsdp=1 mesh.tp={n}), or mesh=single"
        )
    return Mesh(np.array(devices).reshape(tuple(sizes.values())), MESH_AXES)


def batch_size_multiple(mesh: Mesh) -> int:
    """The number of devices the batch axis is split over (``data × fsdp``)."""
    return int(np.prod([mesh.shape[a] for a in BATCH_AXES if a in mesh.shape]))


def batch_spec(mesh: Mesh) -> P:
    """Split the leading (batch) axis over the mesh's batch axes (those it has)."""
    return P(tuple(a for a in BATCH_AXES if a in mesh.shape))


def _key_name(key) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def param_path(path) -> str:
    """``"body/layers/attn/q/w"`` from a pytree key path."""
    return "/".join(_key_name(k) for k in path)


def param_specs(params: Any, table: Mapping[str, ParamAxes], mesh: Mesh, *, log: bool = True) -> Any:
    """A PartitionSpec per leaf of ``params``, from its logical axes in ``table`` (``Family.param_axes``) and
    :data:`RULES`.

    A dimension whose mesh axis does not divide it (or its number of heads) is replicated along that axis;
    the tensors concerned are logged once (``log``). ModelError for a leaf the table lacks.
    """
    replicated: list[str] = []

    def spec(path, leaf):
        name = param_path(path)
        if name not in table:
            raise ModelError(f"parameter {name!r} is not a parameter of the model's body or head")
        axes = table[name]
        if len(axes.names) != np.ndim(leaf):
            raise ModelError(
                f"parameter {name!r} has shape {np.shape(leaf)} but {len(axes.names)} logical axes {axes.names}"
            )
        out = []
        for logical, dim in zip(axes.names, np.shape(leaf)):
            axis = RULES.get(logical) if logical else None
            size = mesh.shape.get(axis, 1) if axis else 1
            units = axes.heads if logical in ("heads", "kv_heads") and axes.heads else dim
            if size == 1:
                out.append(None)
            elif dim % size or units % size:
                replicated.append(f"{name} ({logical}={units} over {axis}={size})")
                out.append(None)
            else:
                out.append(axis)
        return P(*out)

    specs = jax.tree_util.tree_map_with_path(spec, params)
    if replicated and log:
        logger.warning("replicated along a mesh axis that does not divide them: %s", "; ".join(replicated))
    return specs


def place_params(params: Any, table: Mapping[str, ParamAxes], mesh: Mesh, dtype=None) -> Any:
    """``params`` (host or device arrays) as global arrays sharded over ``mesh`` by :func:`param_specs`.

    Each device's slice is cut from the host array and cast to ``dtype`` (floating leaves only) on its
    own, so no full-size cast copy is made; with several processes each fills only its own devices.
    """
    specs = param_specs(params, table, mesh)

    def place(leaf, spec):
        sharding = NamedSharding(mesh, spec)
        if isinstance(leaf, jax.Array):
            return jax.device_put(leaf.astype(_target(leaf, dtype)), sharding)
        return jax.make_array_from_callback(leaf.shape, sharding, lambda index: host_cast(leaf[index], dtype))

    return jax.tree.map(place, params, specs)


def _target(leaf, dtype) -> np.dtype:
    floating = dtype is not None and jnp.issubdtype(leaf.dtype, jnp.floating)
    return np.dtype(dtype) if floating else np.dtype(leaf.dtype)


def host_cast(leaf, dtype=None) -> np.ndarray:
    """A host array (a NumPy view, a ``checkpoint.LayerStack`` or a slice of one) as a new NumPy array,
    floating values cast to ``dtype``; the memory-mapped pages read are unmapped afterwards
    (``checkpoint.drop_pages``), so the resident size grows by the copy only."""
    with np.errstate(over="ignore"):  # values that overflow the dtype are named by loading.check_finite
        out = np.array(leaf, dtype=_target(leaf, dtype), copy=True)
    drop_pages(leaf)
    return out


def device_params(params: Any, dtype=None) -> Any:
    """``params`` (host arrays, e.g. ``params_from_hf``'s views of a checkpoint) on the default device, one
    leaf at a time, floating leaves cast to ``dtype`` on the host: never a cast copy of the whole model,
    and every leaf its own buffer (a tied head is untied)."""
    return jax.tree.map(lambda x: jnp.asarray(host_cast(x, dtype)), params)


def is_placed_on(params: Any, mesh: Mesh) -> bool:
    """True when every leaf is a global array with a sharding over ``mesh``."""
    return all(
        isinstance(x, jax.Array) and isinstance(x.sharding, NamedSharding) and x.sharding.mesh == mesh
        for x in jax.tree.leaves(params)
    )


__all__ = [
    "OUTPUT_HEAD_AXES",
    "ParamAxes",
    "RULES",
    "module_axes",
    "MESH_AXES",
    "BATCH_AXES",
    "make_mesh",
    "param_specs",
    "place_params",
    "batch_spec",
    "batch_size_multiple",
    "is_placed_on",
    "device_params",
    "host_cast",
]
