"""How many bytes of a model's weights each device holds on a mesh, computed without devices or weights.

The same partition rules as loading (:func:`jaxassoc.models.partitioning.param_specs`: a dimension is split
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

from jaxassoc.models.partitioning import MESH_AXES, param_specs


class MeshShape(NamedTuple):
    """A mesh's axis sizes without devices: what :func:`param_specs` reads of a mesh."""

    shape: dict[str, int]


def bytes_per_device(shapes: Any, family: str, sizes: Mapping[str, int], units: Mapping[str, int],
                     itemsize: int) -> int:
    """Bytes of the parameter tree ``shapes`` (leaves with ``.shape``) one device holds on a mesh of axis
    ``sizes`` (``{"data", "fsdp", "tp"}``), at ``itemsize`` bytes per value."""
    mesh = MeshShape({axis: int(sizes.get(axis, 1)) for axis in MESH_AXES})
    specs = param_specs(shapes, family, mesh, units)

    def leaf_bytes(leaf, spec) -> int:
        split = [mesh.shape[axis] if axis else 1 for axis in (*spec, *[None] * (len(leaf.shape) - len(spec)))]
        return math.prod(d // s for d, s in zip(leaf.shape, split)) * itemsize

    return sum(jax.tree.leaves(jax.tree.map(leaf_bytes, shapes, specs)))


def total_bytes(shapes: Any, itemsize: int) -> int:
    """Bytes of the whole parameter tree, one copy."""
    return sum(int(np.prod(leaf.shape)) * itemsize for leaf in jax.tree.leaves(shapes))
