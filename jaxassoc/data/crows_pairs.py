"""CrowS-Pairs (Nangia et al. 2020): 1,508 minimal sentence pairs, one more and one less stereotyping.

The packaged file (``crows_pairs/``, CC BY-SA 4.0) or a user's CSV in the same layout (``dataset.path``):
columns ``sent_more``, ``sent_less``, ``stereo_antistereo`` (``stereo``: ``sent_more`` states a stereotype
of a disadvantaged group; ``antistereo``: it violates one of an advantaged group) and ``bias_type``; an
unnamed first column, when present, is the pair's id. Other columns are kept out. A missing column, an
empty sentence, an unknown direction or a pair whose two sentences are the same is a
:class:`~jaxassoc.errors.DataError` naming the file, the line and the field. Known problems of the data:
``docs/methods.md`` §6.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from jaxassoc.data._files import read_text
from jaxassoc.data.textfile import read_utf8
from jaxassoc.errors import DataError

CROWS_PAIRS_FILE = "crows_pairs/crows_pairs_anonymized.csv"
COLUMNS = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")
DIRECTIONS = ("stereo", "antistereo")


def load_crows_pairs(path: str | Path | None = None) -> pd.DataFrame:
    """One row per pair, in file order: ``pair`` (the file's id, else the row number), ``line`` (where the
    row starts in the file), ``sent_more``, ``sent_less``, ``direction``, ``bias_type``. ``path``: a user's
    file (None: the packaged one)."""
    if path is None:
        source, text = f"packaged file {CROWS_PAIRS_FILE}", read_text(CROWS_PAIRS_FILE)
    else:
        source = str(path)
        if not Path(path).is_file():
            raise DataError(f"{source}: no such file; give the path of a CrowS-Pairs CSV file")
        text = read_utf8(Path(path), source)
    return parse_crows_pairs(text, source)


def parse_crows_pairs(text: str, source: str) -> pd.DataFrame:
    """The pairs of a CrowS-Pairs CSV text (see :func:`load_crows_pairs`); ``source`` names it in errors."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        raise DataError(f"{source}: the file is empty; it needs a header with the columns {list(COLUMNS)}")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{source}, line 1: the header lacks the column(s) {missing}; a CrowS-Pairs file has the columns "
            f"{list(COLUMNS)} (and an unnamed id column first), as nyu-mll/crows-pairs' crows_pairs_anonymized.csv"
        )
    at = {c: header.index(c) for c in COLUMNS}
    has_id = header[0] == ""
    rows, start = [], reader.line_num + 1
    for number, fields in enumerate(reader, 1):
        if not any(f.strip() for f in fields):
            start = reader.line_num + 1
            continue
        where = f"{source}, line {start} (pair {number})"
        if len(fields) != len(header):
            raise DataError(f"{where}: {len(fields)} fields where the header has {len(header)}")
        row = {c: fields[at[c]] for c in COLUMNS}  # sentences as written: they are tokenised as they are
        row["stereo_antistereo"], row["bias_type"] = row["stereo_antistereo"].strip(), row["bias_type"].strip()
        for column in COLUMNS:
            if not row[column].strip():
                raise DataError(f"{where}: the field {column!r} is empty")
        if row["stereo_antistereo"] not in DIRECTIONS:
            raise DataError(
                f"{where}: stereo_antistereo is {row['stereo_antistereo']!r}; it must be one of {list(DIRECTIONS)}"
            )
        if row["sent_more"] == row["sent_less"]:
            raise DataError(f"{where}: sent_more and sent_less are the same sentence; a pair must differ")
        pair = fields[0] if has_id and fields[0].strip() else str(number - 1)
        rows.append(
            {
                "pair": pair,
                "line": start,
                "sent_more": row["sent_more"],
                "sent_less": row["sent_less"],
                "direction": row["stereo_antistereo"],
                "bias_type": row["bias_type"],
            }
        )
        start = reader.line_num + 1
    if not rows:
        raise DataError(f"{source}: no pairs below the header")
    return pd.DataFrame(rows)
