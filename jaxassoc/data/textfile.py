"""Text files read as UTF-8: a leading byte-order mark is dropped, anything else that is not UTF-8 is a
DataError naming the file, the line and the bytes (never a silent replacement character)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from jaxassoc.errors import DataError

BOM = "\ufeff"
RESAVE = "re-save it as UTF-8"


def _not_utf8(source: str, raw: bytes, error: UnicodeDecodeError, first_line: int = 1, fix: str = RESAVE) -> DataError:
    line = first_line + raw.count(b"\n", 0, error.start)
    column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
    return DataError(
        f"{source}, line {line}, column {column}: {raw[error.start : error.end]!r} is not UTF-8 (the file "
        f"is in another encoding, e.g. Latin-1); {fix}"
    )


def decode_utf8(raw: bytes, source: str, fix: str = RESAVE) -> str:
    """``raw`` decoded as UTF-8 without a leading BOM; ``source`` names the file in the error, ``fix``
    says what to do."""
    try:
        return raw.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as e:
        raise _not_utf8(source, raw, e, fix=fix) from None


def read_utf8(path: Path, source: str) -> str:
    """The text of ``path`` (see :func:`decode_utf8`); unreadable files are a DataError too."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise DataError(f"{source} cannot be read: {e.strerror or e}") from None
    return decode_utf8(raw, source)


def utf8_lines(path: Path, source: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a UTF-8 text file, read lazily, line ends kept, BOM dropped."""
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _not_utf8(source, raw, e, number) from None
            yield number, line.removeprefix(BOM) if number == 1 else line


def check_header(header: Sequence[str], source: str) -> None:
    """DataError naming the first column a CSV header names twice (its rows would be read ambiguously)."""
    repeated = [c for c in dict.fromkeys(header) if c and header.count(c) > 1]
    if repeated:
        raise DataError(f"{source}, line 1: the header names the column {repeated[0]!r} twice; name each column once")
