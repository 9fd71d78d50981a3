"""Where the packaged data files live, and a content hash of them for provenance.

The files ship inside the wheel under ``jaxassoc/data/files/<folder>/`` (``package-data`` in
``pyproject.toml``); every folder keeps its ``SOURCE.md`` / ``COMMIT`` / licence file. The list of files,
their origin and terms is in ``DATA_LICENSES.md`` at the repository root.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from jaxassoc.errors import DataError

FILES_ROOT: Path = Path(__file__).resolve().parent / "files"

_REINSTALL = "pip install --force-reinstall --no-deps jaxassoc"


def data_path(relative: str) -> Path:
    """The packaged file or folder ``files/<relative>``; DataError naming it if it is missing."""
    path = FILES_ROOT / relative
    if not path.exists():
        raise DataError(
            f"packaged data file {relative!r} is missing (looked for {path}); the jaxassoc "
            f"installation is incomplete: reinstall it with `{_REINSTALL}`"
        )
    return path


def read_text(relative: str, encoding: str = "utf-8") -> str:
    """The text of a packaged file, line ends kept as stored (``newline=""``)."""
    with data_path(relative).open(encoding=encoding, newline="") as handle:
        return handle.read()


def read_lines(relative: str) -> list[str]:
    """The lines of a packaged text file, split on ``\n`` only (a trailing ``\r`` is dropped), without
    the empty string after a final newline. Unlike ``str.splitlines`` this never splits inside a line
    at characters such as U+2028 or form feeds."""
    lines = read_text(relative).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_json(relative: str) -> Any:
    """A packaged JSON file, parsed."""
    return json.loads(read_text(relative))


def content_hash(relatives: tuple[str, ...], length: int = 12) -> str:
    """Short SHA-256 over the bytes and relative paths of the given files (folders: all files inside)."""
    digest = hashlib.sha256()
    for relative in relatives:
        root = data_path(relative)
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for file in files:
            digest.update(file.relative_to(FILES_ROOT).as_posix().encode())
            digest.update(b"\0")
            digest.update(file.read_bytes())
            digest.update(b"\0")
    return digest.hexdigest()[:length]
