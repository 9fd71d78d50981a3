"""How many bytes of a model's weights each device holds on a mesh, computed without devices or weights.

The same partition rules as loading (:func:`jaxassoc.models.mesh.param_specs`: a dimension is split
over its mesh axis only when the axis divides it and its heads) applied to the parameter *shapes* of a
family's config, so a user can check that a model fits before asking for the hardware:

    python -m jaxassoc.models.sizing            # the table of docs/multihost.md

Weights only: activations, the KV cache of decoding and XLA's workspace come on top (a few GB for the
batch sizes of the conf/model files).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple

import jax
import numpy as np

from jaxassoc.models.mesh import MESH_AXES, ParamAxes, param_specs


class MeshShape(NamedTuple):
    """A mesh's axis sizes without devices: what :func:`param_specs` reads of a mesh."""

    shape: dict[str, int]


def bytes_per_device(shapes: Any, axes: Mapping[str, ParamAxes], sizes: Mapping[str, int], itemsize: int) -> int:
    """Bytes of the parameter tree ``shapes`` (leaves with ``.shape``; their logical ``axes``:
    ``Family.param_axes``) one device holds on a mesh of axis ``sizes`` (``{"data", "fsdp", "tp"}``), at
    ``itemsize`` bytes per value."""
    mesh = MeshShape({axis: int(sizes.get(axis, 1)) for axis in MESH_AXES})
    specs = param_specs(shapes, axes, mesh, log=False)

    def leaf_bytes(leaf, spec) -> int:
        split = [mesh.shape[axis] if axis else 1 for axis in (*spec, *[None] * (len(leaf.shape) - len(spec)))]
        return math.prod(d // s for d, s in zip(leaf.shape, split)) * itemsize

    return sum(jax.tree.leaves(jax.tree.map(leaf_bytes, shapes, specs)))


def total_bytes(shapes: Any, itemsize: int) -> int:
    """Bytes of the whole parameter tree, one copy."""
    return sum(int(np.prod(leaf.shape)) * itemsize for leaf in jax.tree.leaves(shapes))


def _llama(hidden: int, mlp: int, layers: int, heads: int, kv_heads: int, vocab: int, context: int) -> dict:
    return {
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": mlp,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": context,
    }


MODELS: dict[str, dict] = {  # the HF config.json fields that decide the weights' shapes
    "smollm2-135m": _llama(576, 1536, 30, 9, 3, 49152, 8192),
    "llama-2-7b": _llama(4096, 11008, 32, 32, 32, 32000, 4096),
    "llama-2-13b": _llama(5120, 13824, 40, 40, 40, 32000, 4096),
    "llama-2-70b": _llama(8192, 28672, 80, 64, 8, 32000, 4096),
}


class Hardware(NamedTuple):
    devices: int
    memory_gib: float  # per device
    meshes: tuple[dict[str, int], ...]  # the mesh sizes the table shows for it


HARDWARE: dict[str, Hardware] = {
    "v5e-8": Hardware(8, 16, ({"fsdp": 8}, {"fsdp": 2, "tp": 4})),
    "v4-32": Hardware(16, 32, ({"fsdp": 16}, {"fsdp": 4, "tp": 4})),  # 16 chips (megacore: one device each)
    "8xH100": Hardware(8, 80, ({"data": 8}, {"fsdp": 8}, {"tp": 8})),
}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2}


def abstract_params(hf_config: dict) -> tuple[Any, Any, dict]:
    """``(family, config, {"body", "head"})`` of a HF config with ``jax.ShapeDtypeStruct`` leaves, from the
    family's NNX module under ``nnx.eval_shape`` (nothing allocated). The head is untied, shaped like the
    input embedding."""
    from flax import nnx

    from jaxassoc.models.family import family_for

    family = family_for(hf_config["model_type"])
    config = family.read_config(hf_config)
    body = nnx.state(family.abstract_body(config)).to_pure_dict()
    embedding = next(
        path.removeprefix("body/")
        for path, axes in family.param_axes(config).items()
        if path.startswith("body/") and axes.names == ("vocab", "embed")
    )
    head = {"W": body[embedding]}
    return family, config, {"body": body, "head": head}


def sizing_rows() -> list[dict]:
    """One row per (model, hardware, mesh, dtype): GiB of weights per device and whether they fit."""
    rows = []
    for model, hf_config in MODELS.items():
        family, config, shapes = abstract_params(hf_config)
        axes = family.param_axes(config)
        for hardware, spec in HARDWARE.items():
            for sizes in spec.meshes:
                full = {"data": 1, "fsdp": 1, "tp": 1, **sizes}
                row = {"model": model, "params_b": total_bytes(shapes, 1) / 1e9, "hardware": hardware, "mesh": full}
                for dtype, itemsize in DTYPE_BYTES.items():
                    gib = bytes_per_device(shapes, axes, full, itemsize) / 2**30
                    row[dtype] = gib
                    row[f"{dtype}_fits"] = gib <= 0.8 * spec.memory_gib
                rows.append(row)
    return rows


def _mesh_args(sizes: dict[str, int]) -> str:
    if sizes["fsdp"] == sizes["tp"] == 1:
        return "mesh=data" if sizes["data"] > 1 else "mesh=single"
    return "mesh=fsdp_tp " + " ".join(f"mesh.{a}={sizes[a]}" for a in ("fsdp", "tp"))


def markdown_table() -> str:
    """The sizing table of docs/multihost.md (weights only; ✗: above 80 % of a device's memory)."""
    lines = ["| model (params) | hardware | mesh | GiB/device fp32 | GiB/device bf16 |", "|---|---|---|---|---|"]
    for r in sizing_rows():
        cells = [f"{r[d]:.2f}{'' if r[f'{d}_fits'] else ' ✗'}" for d in DTYPE_BYTES]
        memory = HARDWARE[r["hardware"]].memory_gib
        lines.append(
            f"| {r['model']} ({r['params_b']:.2f} B) | {r['hardware']} ({memory:g} GiB) | "
            f"`{_mesh_args(r['mesh'])}` | {cells[0]} | {cells[1]} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
