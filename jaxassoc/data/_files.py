"""Where the packaged data files live, and a content hash of them for provenance.

The files ship inside the wheel under ``jaxassoc/data/files/<folder>/`` (``package-data`` in
``pyproject.toml``); every folder keeps its ``SOURCE.md`` / ``COMMIT`` / licence file. The list of files,
their origin and terms is in ``DATA_LICENSES.md`` at the repository root.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from jaxassoc.data.textfile import decode_utf8
from jaxassoc.errors import DataError, JaxassocError

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


def read_text(relative: str) -> str:
    """The UTF-8 text of a packaged file, line ends kept as stored; DataError naming the file and line if
    it is not UTF-8."""
    path = data_path(relative)
    fix = f"reinstall jaxassoc with `{_REINSTALL}`"
    return decode_utf8(path.read_bytes(), f"packaged data file {path}", fix=fix)


def read_lines(relative: str) -> list[str]:
    """The lines of a packaged text file, split on ``\n`` only (a trailing ``\r`` is dropped), without
    the empty string after a final newline. Unlike ``str.splitlines`` this never splits inside a line
    at characters such as U+2028 or form feeds."""
    lines = read_text(relative).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_json(relative: str) -> Any:
    """A packaged JSON file, parsed; DataError naming the file, line and column if it is not JSON."""
    try:
        return json.loads(read_text(relative))
    except json.JSONDecodeError as e:
        raise malformed_error(relative, f"not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None


def malformed_error(relative: str, what: str) -> DataError:
    """The error for a packaged file whose content is not what its loader expects."""
    return DataError(
        f"packaged data file {relative!r} is malformed: {what}; the jaxassoc installation is damaged: "
        f"reinstall it with `{_REINSTALL}`"
    )


@contextlib.contextmanager
def parsing(relative: str) -> Iterator[None]:
    """Inside the block, a missing key, a wrong type or a bad value (KeyError, IndexError, TypeError,
    ValueError) while reading the packaged file ``relative`` becomes a DataError naming it."""
    try:
        yield
    except JaxassocError:
        raise
    except KeyError as e:
        raise malformed_error(relative, f"the key {e.args[0]!r} is missing") from None
    except (IndexError, TypeError, ValueError) as e:
        raise malformed_error(relative, f"{type(e).__name__}: {e}") from None


def read_csv(
    relative: str,
    *,
    columns: Sequence[str] = (),
    numeric: Sequence[str] = (),
    nullable: Sequence[str] = (),
    **options,
) -> pd.DataFrame:
    """A packaged CSV/TSV file (``options`` go to ``pandas.read_csv``; ``.gz`` files are decompressed).

    DataError naming the file if pandas cannot parse it (a row with too many fields), if one of
    ``columns`` is missing, or if a ``numeric`` column holds a value that is not a number or is missing
    (a short row), naming the column, row and value; ``nullable`` numeric columns may hold empty values.
    """
    path = data_path(relative)
    source = path if relative.endswith(".gz") else io.StringIO(read_text(relative))
    try:
        frame = pd.read_csv(source, **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
        raise malformed_error(relative, " ".join(str(e).split()) or type(e).__name__) from None
    if "index_col" not in options and not isinstance(frame.index, pd.RangeIndex):
        # pandas silently turns the first column into an index when the first rows have one field too many
        raise malformed_error(relative, "its first data row has more fields than its header")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise malformed_error(relative, f"it has no column {missing} (its columns: {list(frame.columns)})")
    for column in numeric:
        values = frame[column]
        bad = pd.to_numeric(values, errors="coerce").isna() & (values.notna() | (column not in nullable))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            value = values.iloc[row]
            what = "is missing" if pd.isna(value) else f"{value!r} is not a number"
            raise malformed_error(relative, f"column {column!r}, data row {row + 1}: the value {what}")
    return frame


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
