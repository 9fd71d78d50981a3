"""On-disk cache of model outputs, so a sweep over statistics options or templates reuses forward passes.

An entry is keyed by a hash of everything that determines it: the model's weight and tokenizer hashes,
the exact inputs (sentences, token ids, options) and a namespace naming the computation. Entries are
``.npz`` files of NumPy arrays, written atomically; reading one back gives the very arrays that were
stored, so a cache hit is bit-identical to the recomputation that filled it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxassoc.app.store import atomic_write
from jaxassoc.models.sharding import all_processes

log = logging.getLogger("jaxassoc")


def model_key(model: Any) -> dict[str, Any]:
    """The parts of a key that pin down a loaded language model: weight and tokenizer hashes, and the
    parameters' dtype (the same file loaded as float32 or bfloat16 gives different outputs)."""
    return {
        "weights": model.provenance.weights_sha256,
        "tokenizer": model.provenance.tokenizer_sha256,
        "dtypes": sorted({str(leaf.dtype) for leaf in jax.tree.leaves(model.params)}),
    }


def cache_key(namespace: str, parts: dict[str, Any]) -> str:
    """sha256 of the namespace and the JSON of ``parts`` (keys sorted; arrays as lists)."""
    text = json.dumps({"namespace": namespace, **parts}, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()


def cached_arrays(
    cache_dir: Path | None,
    namespace: str,
    parts: dict[str, Any],
    compute: Callable[[], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """``compute()``'s arrays, read from ``cache_dir`` when an entry with the same key exists.

    ``cache_dir=None`` disables the cache.
    """
    if cache_dir is None:
        return compute()
    path = Path(cache_dir) / namespace / f"{cache_key(namespace, parts)}.npz"
    if all_processes(path.exists()):  # multi-host: a hit only when every host has the entry
        with np.load(path, allow_pickle=False) as stored:
            log.info("cache hit: %s %s", namespace, path.name[:12])
            return {name: stored[name] for name in stored.files}
    arrays = {name: _plain(np.asarray(value)) for name, value in compute().items()}
    atomic_write(path, lambda p: _save(p, arrays))
    return arrays


def _plain(array: np.ndarray) -> np.ndarray:
    """Object arrays (e.g. pandas string columns) as fixed-width unicode, so no pickle is stored."""
    return array.astype(str) if array.dtype == object else array


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
