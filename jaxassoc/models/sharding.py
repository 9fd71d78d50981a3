"""Data parallelism over local devices: the batch axis split over a 1-D ``("data",)`` mesh, params replicated."""

from __future__ import annotations

from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P


def data_mesh() -> Mesh:
    """A mesh of all local devices along one ``"data"`` axis."""
    return Mesh(jax.devices(), ("data",))


def batch_sharding(mesh: Mesh | None = None) -> NamedSharding:
    """Split the leading (batch) axis over the mesh's ``"data"`` axis."""
    return NamedSharding(mesh or data_mesh(), P("data"))


def replicated_sharding(mesh: Mesh | None = None) -> NamedSharding:
    return NamedSharding(mesh or data_mesh(), P())


def replicate(tree: Any, mesh: Mesh | None = None) -> Any:
    """Place every array of a pytree (e.g. params) on all devices of the mesh."""
    return jax.device_put(tree, replicated_sharding(mesh))


def shard_batch(tree: Any, mesh: Mesh | None = None) -> Any:
    """Split the leading axis of every array of a pytree over the mesh (size must divide evenly)."""
    return jax.device_put(tree, batch_sharding(mesh))
