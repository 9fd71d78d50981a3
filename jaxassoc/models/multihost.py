"""Data parallelism over all devices: the batch axis split over a 1-D ``("data",)`` mesh, params replicated.

On one host (``jax.process_count() == 1``) arrays are placed with ``device_put`` and read back with
``np.asarray``. With several processes (``jax.distributed.initialize``, one process per host) the mesh
spans every global device, ordered by process so that each process's devices hold one contiguous block
of rows: every process builds the same global batch on its host, feeds only its own rows
(:func:`process_rows`, ``jax.make_array_from_process_local_data``), and the outputs are gathered back
(``multihost_utils.process_allgather``) so every process gets all rows. See ``docs/multihost.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxassoc.errors import ConfigError
from jaxassoc.models.mesh import batch_size_multiple, is_placed_on


def data_mesh() -> Mesh:
    """A mesh of all global devices (on one host: its local devices) along one ``"data"`` axis, ordered
    by (process, device id) so that each process owns a contiguous block of the batch axis."""
    return Mesh(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)), ("data",))


def batch_sharding(mesh: Mesh | None = None) -> NamedSharding:
    """Split the leading (batch) axis over the mesh's batch axes: ``"data"`` (and ``"fsdp"`` when the
    mesh has it, :mod:`jaxassoc.models.mesh`)."""
    mesh = mesh or data_mesh()
    return NamedSharding(mesh, P(tuple(a for a in ("data", "fsdp") if a in mesh.axis_names)))


def replicated_sharding(mesh: Mesh | None = None) -> NamedSharding:
    return NamedSharding(mesh or data_mesh(), P())


def process_rows(device_processes: Sequence[int], global_batch: int, process: int) -> slice:
    """The rows of a global batch that ``process`` feeds, when the batch axis is split evenly over devices
    owned by ``device_processes`` (the process index of each device, in mesh order).

    ConfigError when the batch does not divide over the devices, or when the process's devices are not
    one contiguous block of the mesh (its rows would not be one slice).
    """
    n_dev = len(device_processes)
    if n_dev == 0 or global_batch % n_dev:
        raise ConfigError(f"a global batch of {global_batch} rows does not split evenly over {n_dev} devices")
    mine = [i for i, p in enumerate(device_processes) if p == process]
    if not mine:
        raise ConfigError(f"process {process} owns no device of the mesh {list(device_processes)}")
    if mine != list(range(mine[0], mine[-1] + 1)):
        raise ConfigError(f"process {process}'s devices are not contiguous in the mesh {list(device_processes)}")
    per_device = global_batch // n_dev
    return slice(mine[0] * per_device, (mine[-1] + 1) * per_device)


def _mesh_processes(mesh: Mesh) -> list[int]:
    return [d.process_index for d in mesh.devices.flat]


def replicate(tree: Any, mesh: Mesh | None = None) -> Any:
    """Place every array of a pytree (e.g. params) on all devices of the mesh. With several processes
    each one fills its own devices from its host copy (all processes hold the same params)."""
    sharding = replicated_sharding(mesh)
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    return jax.tree.map(lambda x: _from_host(np.asarray(x), sharding), tree)


def _from_host(host: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """A global array from a host copy that every process holds: each fills only its own devices."""
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def shard_batch(tree: Any, mesh: Mesh | None = None) -> Any:
    """Split the leading axis of every array of a pytree over the mesh (size must divide evenly).

    Every process passes the same global batch; with several processes each feeds only its
    :func:`process_rows` and the result is one global array per leaf."""
    mesh = mesh or data_mesh()
    sharding = batch_sharding(mesh)
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)
    if mesh.axis_names != ("data",):  # a model-parallel mesh: each process fills its own devices' rows
        return jax.tree.map(lambda x: _from_host(np.asarray(x), sharding), tree)
    processes, me = _mesh_processes(mesh), jax.process_index()

    def feed(x):
        host = np.asarray(x)
        rows = process_rows(processes, host.shape[0], me)
        return jax.make_array_from_process_local_data(sharding, host[rows], host.shape)

    return jax.tree.map(feed, tree)


def to_host(tree: Any) -> Any:
    """Every leaf as a NumPy array holding all rows: ``np.asarray`` on one process, an all-gather of the
    global arrays across processes otherwise."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def all_processes(flag: bool) -> bool:
    """True when ``flag`` is true on every process (an all-gather; the flag itself on one process).

    Processes must take the same branch before a collective: e.g. skip a forward pass only when every
    host finds it in the cache, or the others would wait on it forever."""
    if jax.process_count() == 1:
        return bool(flag)
    return bool(np.all(multihost_utils.process_allgather(np.asarray(bool(flag)))))


class Feeder:
    """Runs a jitted ``fn(params, *batch)`` on host batches, on one device (``mesh`` None) or with the
    batch's leading axis split over a mesh's batch axes: leaves of ``params`` already sharded over the mesh
    (``load_model(..., mesh=mesh)``) stay as they are, the others (a data mesh's model, small arrays a
    metric adds) are replicated over it; with several processes each feeds its own rows and every process
    gets all outputs back. Every batch loop of the library runs through one."""

    def __init__(self, params: Any, mesh: Mesh | None):
        self.mesh = mesh
        if mesh is not None:
            params = jax.tree.map(lambda x: x if is_placed_on(x, mesh) else replicate(x, mesh), params)
        self.params = params

    def rows(self, n: int) -> int:
        """``n`` rows rounded up to a multiple of the devices the batch axis is split over."""
        per = 1 if self.mesh is None else batch_size_multiple(self.mesh)
        return -(-n // per) * per

    def __call__(self, fn: Any, *batch: np.ndarray) -> Any:
        """``fn(params, *batch)`` as NumPy arrays holding every row."""
        if self.mesh is None:
            return jax.tree.map(np.asarray, fn(self.params, *batch))
        return to_host(fn(self.params, *shard_batch(batch, self.mesh)))


def in_batches(groups: list, progress: bool) -> Any:
    """``groups`` (the batches' row indices), with a progress bar when ``progress`` (on a terminal); else a
    log line every 30 s with the batches done and the time left (:func:`jaxassoc.progress.progress`)."""
    from jaxassoc.progress import progress as shown

    return shown(groups, "batches", quiet=not progress, unit="batch")


__all__ = [
    "Feeder",
    "all_processes",
    "batch_sharding",
    "data_mesh",
    "in_batches",
    "process_rows",
    "replicate",
    "replicated_sharding",
    "shard_batch",
    "to_host",
]
