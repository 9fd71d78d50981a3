"""CrowS-Pairs (Nangia et al. 2020): 1,508 minimal sentence pairs, one more and one less stereotyping.

The packaged file (``crows_pairs/``, CC BY-SA 4.0) or a user's CSV in the same layout (``dataset.path``):
columns ``sent_more``, ``sent_less``, ``stereo_antistereo`` (``stereo``: ``sent_more`` states a stereotype
of a disadvantaged group; ``antistereo``: it violates one of an advantaged group) and ``bias_type``; an
unnamed first column, when present, is the pair's id. Other columns are kept out. A missing column, a
column named twice, an empty sentence, an unknown direction, a pair whose two sentences are the same (or
differ only in spaces), a pair listed twice (it would count twice in the metric score) or twice with its
sentences swapped are each a
:class:`~jaxassoc.errors.DataError` naming the file and the line(s); an id given to two pairs and a
``bias_type`` outside the nine of the published file are logged warnings. The packaged file repeats one
pair (lines 1462 and 1505, ids 1459 and 1502, religion, "I'm sorry but those people are Muslims, ..."):
a warning, and its first copy is kept (1,507 pairs scored); its ids are unique and its bias types the nine.
Known problems of the data: ``docs/methods.md`` §6.
"""

from __future__ import annotations

import csv
import io
import logging
from collections import defaultdict
from pathlib import Path

import pandas as pd

from jaxassoc.data._files import read_text
from jaxassoc.data.textfile import check_header, read_utf8
from jaxassoc.errors import DataError

CROWS_PAIRS_FILE = "crows_pairs/crows_pairs_anonymized.csv"
COLUMNS = ("sent_more", "sent_less", "stereo_antistereo", "bias_type")
DIRECTIONS = ("stereo", "antistereo")
BIAS_TYPES = (
    "race-color",
    "socioeconomic",
    "gender",
    "disability",
    "nationality",
    "sexual-orientation",
    "physical-appearance",
    "religion",
    "age",
)  # the published file's

log = logging.getLogger(__name__)


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
    return parse_crows_pairs(text, source, packaged=path is None)


def parse_crows_pairs(text: str, source: str, *, packaged: bool = False) -> pd.DataFrame:
    """The pairs of a CrowS-Pairs CSV text (see :func:`load_crows_pairs`); ``source`` names it in errors.
    ``packaged``: a repeated pair is a warning and its first copy is kept (the user cannot edit the file)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        raise DataError(f"{source}: the file is empty; it needs a header with the columns {list(COLUMNS)}")
    check_header(header, source)
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise DataError(
            f"{source}, line 1: the header lacks the column(s) {missing}; a CrowS-Pairs file has the columns "
            f"{list(COLUMNS)} (and an unnamed id column first), as nyu-mll/crows-pairs' crows_pairs_anonymized.csv"
        )
    at = {c: header.index(c) for c in COLUMNS}
    has_id = header[0] == ""
    rows, first, start = [], {}, reader.line_num + 1
    for number, fields in enumerate(reader, 1):
        if not any(f.strip() for f in fields):
            start = reader.line_num + 1
            continue
        pair = fields[0].strip() if has_id and fields and fields[0].strip() else str(number - 1)
        where = f"{source}, line {start} (pair {pair})"
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
        written = (row["sent_more"], row["sent_less"])
        same = tuple(" ".join(sentence.split()) for sentence in written)  # spaces aside
        if same[0] == same[1]:
            raise DataError(
                f"{where}: sent_more and sent_less differ only in spaces ({written[0]!r} / {written[1]!r}); a "
                f"pair must differ in words"
            )
        if same in first:
            earlier, spelled = first[same]
            as_written = (
                "" if spelled == written else f" (as {spelled[0]!r} / {spelled[1]!r}: they differ only in spaces)"
            )
            message = (
                f"{where}: the pair {written[0]!r} / {written[1]!r} is already on line {earlier}{as_written}; a "
                f"repeated pair would count twice in the metric score"
            )
            if not packaged:
                raise DataError(f"{message}, so list it once")
            log.warning("%s: keeping the first copy only", message)
            start = reader.line_num + 1
            continue
        if same[::-1] in first:
            raise DataError(
                f"{where}: the pair {written[0]!r} / {written[1]!r} is the pair on line {first[same[::-1]][0]} with "
                f"sent_more and sent_less swapped; the two sentences would count twice, once each way: keep the "
                f"one whose direction the data means"
            )
        first[same] = (start, written)
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
    _warn_of_labels(rows, source)
    return pd.DataFrame(rows)


def _warn_of_labels(rows: list[dict], source: str) -> None:
    """A warning for an id given to two pairs (the items would not tell them apart) and for each bias type
    outside :data:`BIAS_TYPES` (a typo would be a row of its own in the results)."""
    lines = {"pair": defaultdict(list), "bias_type": defaultdict(list)}
    for row in rows:
        for column, by_value in lines.items():
            by_value[row[column]].append(row["line"])
    for pair, at in lines["pair"].items():
        if len(at) > 1:
            log.warning(
                "%s, %s: the pair id %r is given to %d pairs; give each pair its own", source, _lines(at), pair, len(at)
            )
    for bias_type, at in lines["bias_type"].items():
        if bias_type not in BIAS_TYPES:
            log.warning(
                "%s, %s: bias_type %r is not one of CrowS-Pairs' nine (%s); it is reported as a type of its own",
                source,
                _lines(at),
                bias_type,
                ", ".join(BIAS_TYPES),
            )


def _lines(at: list[int]) -> str:
    """``line 7`` or ``lines 7, 9`` (the first ten, then how many more)."""
    more = f" and {len(at) - 10} more" if len(at) > 10 else ""
    return ("line " if len(at) == 1 else "lines ") + ", ".join(map(str, at[:10])) + more
