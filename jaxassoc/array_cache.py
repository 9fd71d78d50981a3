"""On-disk cache of readout arrays: :func:`cached_arrays` returns ``compute()``'s arrays, or the very arrays an
earlier call with the same key stored, so a hit is bit-identical to the recomputation that filled it.

A key is the sha256 of a namespace (the computation) and the JSON of everything that determines the arrays:
the model (:func:`model_key`), the exact inputs and the batching, and the code (jaxassoc's version and a
hash of its source, :func:`jaxassoc.code_identity.jaxassoc_code`; for a ``compute`` defined outside
jaxassoc, a plugin's, its module's hash too), so an upgrade or an edit misses. Each entry stores its key and
a checksum of its arrays: a damaged, truncated or foreign file is a logged miss, and an unwritable cache is
skipped with a warning. Two processes computing the same entry at once compute it once: the second waits
for the first's claim (a lock file beside the entry) and reads its result. The app chooses the folder and
manages it (:mod:`jaxassoc.app.cache`).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import jax
import ml_dtypes
import numpy as np

from jaxassoc.code_identity import jaxassoc_code, module_code
from jaxassoc.io import atomic_write, host_name
from jaxassoc.models.multihost import all_processes

log = logging.getLogger("jaxassoc")


def model_key(model: Any) -> dict[str, Any]:
    """The part of a key that pins down a loaded language model: its :meth:`~jaxassoc.models.base.LanguageModel.
    fingerprint` (weight and tokenizer hashes, the parameters' dtypes, the edits bound into it: an ablated or
    erased model's outputs are another model's)."""
    return {"model": model.fingerprint()}


def cache_key(namespace: str, parts: dict[str, Any]) -> str:
    """sha256 of the namespace, the code identity and the JSON of ``parts`` (keys sorted; arrays as lists)."""
    text = json.dumps({"namespace": namespace, "code": jaxassoc_code(), **parts}, sort_keys=True, default=_jsonable)
    return hashlib.sha256(text.encode()).hexdigest()


ENTRY_SUFFIX = ".jaxassoc.npz"
"""Every entry is ``<namespace>/<64 hex digits>.jaxassoc.npz``; nothing else in a cache folder is ours
(:func:`is_entry`), so clearing and eviction never touch a user's own files beside the entries."""
LOCK_SUFFIX = ".jaxassoc.lock"
"""The claim of a process computing an entry: ``<namespace>/<64 hex digits>.jaxassoc.lock``."""
_ENTRY_NAME = re.compile(r"[0-9a-f]{64}" + re.escape(ENTRY_SUFFIX))
_KEY, _SHA256 = "jaxassoc.key", "jaxassoc.sha256"  # an entry's own key and its arrays' checksum
WAIT_LOG_SECONDS = 60.0  # a process waiting for another's claim says so again this often


def compute_code(compute: Callable[..., Any] | None) -> dict[str, Any]:
    """The key part naming the code of a ``compute`` defined outside jaxassoc (a plugin's): its module's
    identity (:func:`jaxassoc.code_identity.module_code`); empty for jaxassoc's own (its code is in every key)."""
    while isinstance(compute, functools.partial):
        compute = compute.func
    module = getattr(compute, "__module__", None) or ""
    if not module or module == "jaxassoc" or module.startswith("jaxassoc."):
        return {}
    return {"compute_code": module_code(module)}


def entry_path(
    cache_dir: Path, namespace: str, parts: dict[str, Any], compute: Callable[..., Any] | None = None
) -> Path:
    """Where the entry of this key lives (``compute``: the function :func:`cached_arrays` is given)."""
    return Path(cache_dir) / namespace / f"{cache_key(namespace, {**parts, **compute_code(compute)})}{ENTRY_SUFFIX}"


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

    ``cache_dir=None`` disables the cache. An entry that cannot be read or does not match its key or its
    checksum (truncated, damaged, a foreign file under its name) is a miss: it is logged, removed and
    recomputed. An entry that cannot be written (read-only folder, full disk) is logged and skipped; the
    arrays are returned all the same. A process that finds another computing the same entry waits for it
    (logged) and reads its result; one process of a multi-host job never waits for another, since they
    compute together.
    """
    if cache_dir is None:
        return compute()
    path = entry_path(cache_dir, namespace, parts, compute)
    stored = _read(path) if path.exists() else None
    if stored is None and jax.process_count() == 1:
        with _claim(path, namespace):
            stored = _read(path) if path.exists() else None  # the claim's previous holder may have written it
            if stored is None:
                return _compute_and_write(path, compute)
    if all_processes(stored is not None):  # multi-host: a hit only when every host has read the entry
        log.info("cache hit: %s %s", namespace, path.name[:12])
        with contextlib.suppress(OSError):
            os.utime(path)  # the entry's last use, which eviction orders by
        return stored
    return _compute_and_write(path, compute)


def _compute_and_write(path: Path, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    arrays = {name: _plain(np.asarray(value)) for name, value in compute().items()}
    stamps = {_KEY: np.array(_key_of(path)), _SHA256: np.array(_checksum(arrays))}
    try:
        atomic_write(path, lambda p: _save(p, {**arrays, **stamps}))
    except OSError as e:
        log.warning("cache: cannot write %s (%s); the result is used but not cached", path, e)
    return arrays


@contextlib.contextmanager
def _claim(path: Path, namespace: str) -> Iterator[None]:
    """Hold the entry's lock file while computing it; wait (logged) while another process holds it. The
    operating system releases a killed holder's lock. The holder that wrote the entry removes the lock
    file; no claim at all where the lock cannot be made (an unwritable cache)."""
    lock = path.with_name(_key_of(path) + LOCK_SUFFIX)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a+")
    except OSError:
        yield
        return
    with handle:
        _acquire(handle, lock, namespace)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {host_name()}\n")
        handle.flush()
        yield
        if path.exists():
            lock.unlink(missing_ok=True)  # a later process finds the entry without waiting on this lock


def _acquire(handle: Any, lock: Path, namespace: str) -> None:
    """Take the exclusive lock of ``handle``, logging when and how long another process holds it."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    start = last_log = time.monotonic()
    holder = lock.read_text().strip() or "another process"
    log.info("cache: %s is computing %s %s; waiting to read its result", holder, namespace, lock.name[:12])
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            time.sleep(0.1)
        if time.monotonic() - last_log >= WAIT_LOG_SECONDS:
            last_log = time.monotonic()
            log.info("cache: still waiting for %s (%.0f s)", holder, last_log - start)
    log.info("cache: %s %s is free after %.1f s", namespace, lock.name[:12], time.monotonic() - start)


def remove_free_locks(folder: Path) -> None:
    """Delete the lock files in ``folder`` that no process holds (left by killed processes)."""
    for lock in Path(folder).glob(f"*{LOCK_SUFFIX}"):
        with contextlib.suppress(OSError), open(lock, "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            lock.unlink(missing_ok=True)


def _key_of(path: Path) -> str:
    return path.name[: -len(ENTRY_SUFFIX)]


def _checksum(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over each array's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _read(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a cache entry; None (after logging and removing it) when it cannot be read, or is not
    the entry of its key with the arrays it was written with."""
    try:
        stored = np.load(path, allow_pickle=False)
        if not isinstance(stored, np.lib.npyio.NpzFile):
            return _discard(path, "not an archive of named arrays")
        with stored:
            arrays = dict(_unbits(name, stored[name]) for name in stored.files)
    except FileNotFoundError:  # removed meanwhile (another job's clean-up)
        return None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        return _discard(path, f"{type(e).__name__}: {e}")
    key, checksum = arrays.pop(_KEY, None), arrays.pop(_SHA256, None)
    if key is None or str(key) != _key_of(path):
        return _discard(path, "it was not written for this key")
    if checksum is None or str(checksum) != _checksum(arrays):
        return _discard(path, "its arrays do not match their checksum")
    return arrays


def _discard(path: Path, why: str) -> None:
    log.warning("cache: ignoring the unreadable entry %s (%s); recomputing it", path, why)
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)
    return None


def _plain(array: np.ndarray) -> np.ndarray:
    """Object arrays (e.g. pandas string columns) as fixed-width unicode, so no pickle is stored."""
    return array.astype(str) if array.dtype == object else array


_BITS = "::"
"""``name::bfloat16``: the array ``name`` of an ml_dtypes dtype (bfloat16 under ``model.precision=bfloat16``), which
``np.load`` cannot read back, stored as the unsigned integers of its bits and viewed back on reading."""


def _save(path: Path, arrays: dict[str, np.ndarray]) -> None:
    stored = {
        (f"{name}{_BITS}{a.dtype.name}" if _is_extension(a) else name): (
            a.view(f"u{a.dtype.itemsize}") if _is_extension(a) else a
        )
        for name, a in arrays.items()
    }
    with open(path, "wb") as f:
        np.savez(f, **stored)


def _is_extension(array: np.ndarray) -> bool:
    return array.dtype.kind == "V" and array.dtype.names is None and hasattr(ml_dtypes, array.dtype.name)


def _unbits(name: str, array: np.ndarray) -> tuple[str, np.ndarray]:
    if _BITS not in name:
        return name, array
    name, dtype = name.split(_BITS)
    return name, array.view(getattr(ml_dtypes, dtype))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def cached_chunks(
    cache_dir: Path | None,
    namespace: str,
    frame: Any,
    rows_per_chunk: int,
    key: Callable[[Any], dict[str, Any]],
    compute: Callable[[Any], dict[str, np.ndarray]],
    *,
    log_as: tuple[str, str] | None = None,
) -> dict[str, np.ndarray]:
    """``compute(chunk)`` (arrays with one entry per row) over ``frame`` (a DataFrame) in chunks of
    ``rows_per_chunk`` rows, each stored under ``key(chunk)`` in ``namespace`` as soon as it is done, so an
    interrupted job resumes at its first unfinished chunk; the arrays concatenated in row order.
    ``log_as=(job, what)`` logs one stage line per chunk ("<job>: n <what> (chunk c/k) in s")."""
    from jaxassoc.progress import stage

    chunks = [frame.iloc[at : at + rows_per_chunk] for at in range(0, len(frame), rows_per_chunk)]
    parts = []
    for c, chunk in enumerate(chunks, 1):
        job, what = log_as or (namespace, "rows")
        with stage(job, f"{what} (chunk {c}/{len(chunks)})", len(chunk)):
            parts.append(cached_arrays(cache_dir, namespace, key(chunk), functools.partial(compute, chunk)))
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
