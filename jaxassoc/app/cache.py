"""On-disk cache of model outputs, so a sweep over statistics options or templates reuses forward passes.

An entry is keyed by a hash of everything that determines it: the model's weight and tokenizer hashes,
the exact inputs (sentences, token ids, options) and a namespace naming the computation. Entries are
``<namespace>/<key>.jaxassoc.npz`` files of NumPy arrays (no other file is ever read, listed or removed as
an entry), written atomically; reading one back gives the very arrays that were
stored, so a cache hit is bit-identical to the recomputation that filled it. A damaged entry is a miss,
and a cache that cannot be written is skipped with a warning: the cache never costs a job its result. Two
jobs that need the same entry at once compute it once (the second waits for the first's claim, a
``<key>.jaxassoc.lock`` file beside the entry). A plugin's entries are keyed on its module's code too.

The cache lives in the user cache folder (:func:`default_cache_dir`), shared by every working folder. A hit
refreshes its entry's modification time, so :func:`evict` (a size limit, ``cache_max_gb``) removes the least
recently used entries first; :func:`entries` and :func:`clear` back the ``jaxassoc-cache`` command. Entries
are read and written by :func:`jaxassoc.array_cache.cached_arrays` (``jaxassoc.plugin.cached_arrays``). After
each job, :func:`label_used` notes on every entry it used the job's model, dataset, metric and intervention
(a ``<key>.jaxassoc.json`` beside the entry, removed with it), so the command can list and clear by them.

Its ``xla/`` folder is JAX's persistent compilation cache (:func:`use_compile_cache`), managed by JAX.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import jax
from jax.experimental.compilation_cache import compilation_cache
from omegaconf import OmegaConf

from jaxassoc import io
from jaxassoc.array_cache import ENTRY_SUFFIX, is_entry, remove_free_locks
from jaxassoc.models.multihost import all_processes

log = logging.getLogger("jaxassoc")

CACHE_ENV = "JAXASSOC_CACHE"
GB = 1e9  # cache_max_gb's unit
COMPILE_CACHE_BYTES = 2 * 10**9  # the xla folder is trimmed to this at the start of each job, oldest files first


def default_cache_dir() -> Path:
    """``$JAXASSOC_CACHE`` if set, else the platform's user cache folder for jaxassoc: ``platformdirs`` when
    installed, else ``$XDG_CACHE_HOME/jaxassoc`` or ``~/.cache/jaxassoc``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    try:
        import platformdirs
    except ImportError:
        xdg = os.environ.get("XDG_CACHE_HOME")
        return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "jaxassoc"
    return Path(platformdirs.user_cache_dir("jaxassoc", appauthor=False))


def register_resolver() -> None:
    """``${jaxassoc.user_cache_dir:}`` (``cache_dir``'s default in the app config) resolves to
    :func:`default_cache_dir` when the config is read. Idempotent."""
    OmegaConf.register_new_resolver("jaxassoc.user_cache_dir", lambda: str(default_cache_dir()), replace=True)


def usable_cache_dir(cache_dir: Path | None) -> Path | None:
    """``cache_dir`` when this process can create files in it (made if missing), else None with a warning:
    a job then runs without the cache instead of failing when it first writes an entry. On several
    hosts the cache is used only when every host can write it."""
    if cache_dir is None:
        return None
    probe = Path(cache_dir) / f".probe~{os.getpid()}"
    try:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        probe.touch()
        probe.unlink()
        writable, reason = True, ""
    except OSError as e:
        writable, reason = False, f"{type(e).__name__}: {e}"
    if all_processes(writable):
        return Path(cache_dir)
    log.warning(
        "cache_dir=%s is not writable%s: running without the cache (set cache_dir to a writable "
        "folder, or cache_dir=null)",
        cache_dir,
        f" ({reason})" if reason else " on every host",
    )
    return None


def remove_stale_temporaries(cache_dir: Path | None) -> None:
    """Delete the temporaries and the claims (lock files no process holds) that killed writers left in the
    cache (its folder and namespace folders)."""
    if cache_dir is None or not Path(cache_dir).is_dir():
        return
    for folder in (Path(cache_dir), *(p for p in Path(cache_dir).iterdir() if p.is_dir())):
        io.remove_stale_temporaries(folder)
        remove_free_locks(folder)


LABELS = ("model", "dataset", "metric", "intervention")
"""What :func:`label_used` notes of the jobs that used an entry (``jaxassoc-cache list`` / ``clear --model``...)."""
LABELS_SUFFIX = ".jaxassoc.json"


@dataclass(frozen=True)
class Entry:
    """One cache entry: its file, namespace (the computation), size and last use (a hit or its write)."""

    path: Path
    namespace: str
    size: int
    last_used: float

    @property
    def labels_path(self) -> Path:
        """The entry's labels file: ``<key>.jaxassoc.json`` beside it."""
        return self.path.with_name(self.path.name[: -len(ENTRY_SUFFIX)] + LABELS_SUFFIX)

    def labels(self) -> dict[str, list[str]]:
        """The models, datasets, metrics and interventions of the jobs that used the entry (empty lists for
        an entry no job labelled: written before labels existed, or through the API)."""
        try:
            found = json.loads(self.labels_path.read_text())
        except (OSError, ValueError):
            found = {}
        found = found if isinstance(found, dict) else {}
        return {k: [str(v) for v in found.get(k, [])] if isinstance(found.get(k), list) else [] for k in LABELS}

    def matches(self, wanted: dict[str, str | None]) -> bool:
        """True when, for each label given in ``wanted`` (None: any), a job of that value used the entry."""
        labels = self.labels()
        return all(value is None or value in labels[k] for k, value in wanted.items())

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.labels_path.unlink(missing_ok=True)


def label_used(cache_dir: Path | None, since: float, labels: dict[str, str]) -> None:
    """Add ``labels`` (one value per :data:`LABELS` key: the job's model, dataset, metric, intervention) to
    every entry used at or after ``since`` (the job's start): the entries the job wrote or read."""
    if cache_dir is None or not Path(cache_dir).is_dir():
        return
    for entry in entries(cache_dir):
        if entry.last_used < since:
            continue
        known = entry.labels()
        merged = {k: sorted({*known[k], labels[k]}) for k in LABELS}
        if merged != known:
            text = json.dumps(merged, sort_keys=True)
            with contextlib.suppress(OSError):  # a label is a convenience: never a job's failure
                io.atomic_write(entry.labels_path, lambda p, text=text: p.write_text(text))


def entries(cache_dir: Path) -> list[Entry]:
    """Every entry in ``cache_dir`` (``<namespace>/<64 hex>.jaxassoc.npz``, :func:`is_entry`), least recently
    used first; other files (a user's own ``.npz`` among them) are not entries and are never touched."""
    found = []
    for path in filter(is_entry, Path(cache_dir).glob(f"*/*{ENTRY_SUFFIX}")):
        if not path.is_file():  # a folder (or a dangling link) under an entry's name is not ours to remove
            continue
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by another job
            stat = path.stat()
            found.append(Entry(path, path.parent.name, stat.st_size, stat.st_mtime))
    return sorted(found, key=lambda e: (e.last_used, str(e.path)))


def clear(
    cache_dir: Path,
    *,
    older_than: float | None = None,
    now: float | None = None,
    where: dict[str, str | None] | None = None,
) -> list[Entry]:
    """Remove the entries not used for ``older_than`` seconds (all when None) and, with ``where`` (e.g.
    ``{"model": "gpt2"}``), only those a job of those labels used (:meth:`Entry.matches`); the removed entries."""
    now = time.time() if now is None else now
    removed = [
        e
        for e in entries(cache_dir)
        if (older_than is None or now - e.last_used > older_than) and e.matches(where or {})
    ]
    for entry in removed:
        entry.remove()
    return removed


def evict(cache_dir: Path | None, max_bytes: int | None, *, keep_since: float) -> list[Entry]:
    """Remove least recently used entries until the cache holds at most ``max_bytes``, never one used at or
    after ``keep_since`` (the entries the job that just ran wrote or read); the removed entries."""
    if cache_dir is None or max_bytes is None or not Path(cache_dir).is_dir():
        return []
    found = entries(cache_dir)
    total = sum(e.size for e in found)
    removed = []
    for entry in found:
        if total <= max_bytes or entry.last_used >= keep_since:
            break
        entry.remove()
        total -= entry.size
        removed.append(entry)
    if removed:
        log.info(
            "cache: removed %d least recently used entries (%s) to keep %s under cache_max_gb=%g",
            len(removed),
            format_size(sum(e.size for e in removed)),
            cache_dir,
            max_bytes / GB,
        )
    if total > max_bytes:
        log.info(
            "cache: %s holds %s, over cache_max_gb=%g, in entries this job used",
            cache_dir,
            format_size(total),
            max_bytes / GB,
        )
    return removed


def format_size(n: float) -> str:
    """Bytes in decimal units: ``512 B``, ``1.5 MB``."""
    units = ("B", "kB", "MB", "GB", "TB")
    i = 0
    while n >= 1000 and i < len(units) - 1:
        n, i = n / 1000, i + 1
    return f"{n:.0f} B" if i == 0 else f"{n:.1f} {units[i]}"


def use_compile_cache(directory: Path | None, max_bytes: int = COMPILE_CACHE_BYTES) -> None:
    """Keep every function XLA compiles in ``directory`` (JAX's persistent compilation cache; None: off), so a
    later process (a rerun, the next job of a launcher's sweep) loads it instead of compiling again: about 8 s
    of a 22 s RPAM job on 2 CPUs. A loaded function is the same program, so results are unchanged. The folder
    is trimmed to ``max_bytes`` (oldest files first) here, not by JAX on every write. A directory the user
    set through ``JAX_COMPILATION_CACHE_DIR`` is left as it is."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    if directory is not None:
        try:
            Path(directory).mkdir(parents=True, exist_ok=True)
            if not os.access(directory, os.W_OK):
                raise PermissionError("not writable")
        except OSError as e:
            log.info("compile_cache: %s cannot be written (%s); compiling without it", directory, e)
            directory = None
    if directory is not None:
        io.trim_folder(Path(directory), max_bytes)
    wanted = None if directory is None else str(directory)
    if jax.config.jax_compilation_cache_dir == wanted:
        return
    jax.config.update("jax_compilation_cache_dir", wanted)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)  # most of ours compile in < 1 s
    # No JAX size limit: with one, every write lists and reads the whole folder, and one entry left without
    # its access-time file (a process killed between the two writes) makes every later write fail.
    jax.config.update("jax_compilation_cache_max_size", -1)
    compilation_cache.reset_cache()  # JAX reads the directory once; a job with another one starts afresh
