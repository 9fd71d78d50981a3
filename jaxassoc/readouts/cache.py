"""On-disk cache of readout arrays: :func:`cached_arrays` returns ``compute()``'s arrays, or the very arrays an
earlier call with the same key stored, so a hit is bit-identical to the recomputation that filled it.

A key is the sha256 of a namespace (the computation) and the JSON of everything that determines the arrays:
the model (:func:`model_key`), the exact inputs and the batching, and the code (jaxassoc's version and a
hash of its source, :func:`jaxassoc.code_identity.jaxassoc_code`), so an upgrade or an edit misses. A damaged entry is a miss, an unwritable
cache is skipped with a warning. The app chooses the folder and manages it (:mod:`jaxassoc.app.cache`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxassoc.code_identity import jaxassoc_code
from jaxassoc.io import atomic_write
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
    """sha256 of the namespace, the code identity and the JSON of ``parts`` (keys sorted; arrays as lists)."""
    text = json.dumps({"namespace": namespace, "code": jaxassoc_code(), **parts}, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()


ENTRY_SUFFIX = ".jaxassoc.npz"
"""Every entry is ``<namespace>/<64 hex digits>.jaxassoc.npz``; nothing else in a cache folder is ours
(:func:`is_entry`), so clearing and eviction never touch a user's own files beside the entries."""
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}" + re.escape(ENTRY_SUFFIX))


def entry_path(cache_dir: Path, namespace: str, parts: dict[str, Any]) -> Path:
    """Where the entry of this key lives."""
    return Path(cache_dir) / namespace / f"{cache_key(namespace, parts)}{ENTRY_SUFFIX}"


def is_entry(path: Path) -> bool:
    """True for a file named as jaxassoc names its cache entries (:data:`ENTRY_SUFFIX`)."""
    return bool(_ENTRY_NAME.fullmatch(Path(path).name))


def cached_arrays(
    cache_dir: Path | None,
    namespace: str,
    parts: dict[str, Any],
    compute: Callable[[], dict[str, np.ndarray]],
) -> dict[str, np.ndarray]:
    """``compute()``'s arrays, read from ``cache_dir`` when an entry with the same key exists.

    ``cache_dir=None`` disables the cache. An entry that cannot be read (truncated, corrupt) is a miss: it
    is logged, removed and recomputed. An entry that cannot be written (read-only folder, full disk) is
    logged and skipped; the arrays are returned all the same.
    """
    if cache_dir is None:
        return compute()
    path = entry_path(cache_dir, namespace, parts)
    stored = _read(path) if path.exists() else None
    if all_processes(stored is not None):  # multi-host: a hit only when every host has read the entry
        log.info("cache hit: %s %s", namespace, path.name[:12])
        with contextlib.suppress(OSError):
            os.utime(path)  # the entry's last use, which eviction orders by
        return stored
    arrays = {name: _plain(np.asarray(value)) for name, value in compute().items()}
    try:
        atomic_write(path, lambda p: _save(p, arrays))
    except OSError as e:
        log.warning("cache: cannot write %s (%s); the result is used but not cached", path, e)
    return arrays


def _read(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a cache entry; None (after logging and removing it) when it cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except FileNotFoundError:  # removed meanwhile (another job's clean-up)
        return None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        log.warning("cache: ignoring the unreadable entry %s (%s: %s); recomputing it", path, type(e).__name__, e)
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
        return None


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
