"""Which code produced a result: jaxassoc's version and source, and a plugin module's files.

Resume reuses a finished job, and the readout cache a stored array, only while the code that made it is
unchanged: an upgrade, an edit of jaxassoc's source (a checkout's uncommitted change included) or of a
plugin's module recomputes. The key is the version and a hash of the source files themselves, so an edit
is noticed even when git cannot see it and a commit that only touches tests or docs is not; the git
commit and whether the tree was dirty are recorded beside it, for people.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def source_sha256(files: list[Path], root: Path) -> str:
    """sha256 (16 hex digits) over each file's path relative to ``root`` and its bytes, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _stamped(path: Path) -> tuple[Path, int, int]:
    """A file with its modification time (ns) and size: a new stamp means the file may have changed."""
    stat = path.stat()
    return path, stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=256)
def _files_sha256(stamped: tuple[tuple[Path, int, int], ...], root: Path) -> str:
    """:func:`source_sha256` of the files, remembered while their stamps stay the same."""
    return source_sha256([path for path, _, _ in stamped], root)


@functools.cache
def _distributions() -> dict[str, list[str]]:
    """Top-level module -> distributions (``importlib.metadata.packages_distributions``, ~0.1 s), once."""
    return dict(importlib.metadata.packages_distributions())


@functools.cache
def jaxassoc_code() -> dict[str, Any]:
    """``{"version", "source_sha256"}``: what the resume and cache keys compare (computed once per process)."""
    try:
        version = importlib.metadata.version("jaxassoc")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {"version": version, "source_sha256": source_sha256(list(_PACKAGE.rglob("*.py")), _PACKAGE)}


@functools.cache
def git_state() -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the git checkout jaxassoc runs from (None each for an installed package)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(_PACKAGE), *args], capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    top = git("rev-parse", "--show-toplevel")
    if not top or not (_PACKAGE.is_relative_to(Path(top).resolve())):
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def module_code(module_name: str) -> dict[str, Any]:
    """A plugin module's identity: its name, the hash of its file (a package: every ``.py`` file in its
    folder; a module imported from a zip: its file as the zip holds it) and its distribution's version when
    it has one. The files are hashed again whenever one's size or modification time changed, so an edit
    shows; unchanged files are not read again (a cache lookup of a plugin's computation asks on every call)."""
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    identity: dict[str, Any] = {"module": module_name, "source_sha256": None, "version": None}
    if file and Path(file).is_file():
        path = Path(file).resolve()
        files = list(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
        identity["source_sha256"] = _files_sha256(tuple(_stamped(f) for f in sorted(files)), path.parent)
    elif file and hasattr(getattr(module, "__loader__", None), "get_data"):  # e.g. imported from a zip
        with contextlib.suppress(OSError):
            identity["source_sha256"] = hashlib.sha256(module.__loader__.get_data(file)).hexdigest()[:16]
    top = module_name.split(".")[0]
    try:
        names = _distributions().get(top) or [top]
        identity["version"] = importlib.metadata.version(names[0])
    except importlib.metadata.PackageNotFoundError:
        pass
    return identity
