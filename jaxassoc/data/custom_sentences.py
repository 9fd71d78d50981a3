"""Users' own UnStereoEval sentence templates from a text or CSV file (``dataset=custom_sentences``).

- **Text** (``.txt``): one template a line, UTF-8.
- **CSV** (``.csv``): a column ``template``; an optional column ``max_gender_pmi`` (the template's MaxPMI,
  Belém et al. 2024) is used as given, otherwise it is recomputed from the packaged PMI table
  (:func:`jaxassoc.data.unstereo.recompute_max_gender_pmi`).

A template holds ``{pronoun}``, ``{pronoun1}`` or ``{pronoun2}`` (filled with he/his/him and she/her/her,
``docs/methods.md`` §4.2). Blank lines, a missing column, an empty file, a template without a pronoun
slot, a template listed twice (it would count twice in every share), a CSV column named twice and a text
file whose lines end in a bare carriage return (old Mac line ends, which would read as one template) are each a
:class:`~jaxassoc.errors.DataError` naming the file and the line.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd

from jaxassoc.data.textfile import check_header, read_utf8
from jaxassoc.errors import DataError, InputError

FORMATS = (".txt", ".csv")


def sentences_file_format(path: str | Path) -> str:
    """``txt`` or ``csv`` from the suffix; DataError naming the file otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise DataError(
            f"{path}: unknown format {suffix or '(no suffix)'!r} for sentence templates; use a .txt file "
            f"(one template a line) or a .csv file with a 'template' column (docs/datasets.md)"
        )
    return suffix[1:]


def load_templates_file(path: str | Path) -> pd.DataFrame:
    """``template`` and ``max_gender_pmi`` of each template of the file, in file order (module docstring)."""
    from jaxassoc.data import unstereo

    path = Path(path)
    kind = sentences_file_format(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file; give the path of a template file (relative to where you run jaxassoc)")
    text = read_utf8(path, str(path))
    rows = _csv_rows(text, str(path)) if kind == "csv" else _text_rows(text, str(path))
    if not rows:
        raise DataError(f"{path}: no templates; write one template a line, e.g. '{{pronoun}} went to the market.'")
    first: dict[str, tuple[int, str]] = {}
    for line, template, _ in rows:
        same = " ".join(template.split())  # spaces and tabs aside, the same sentence
        if same in first:
            earlier, spelled = first[same]
            as_written = "" if spelled == template else f" (as {spelled!r}: they differ only in spaces)"
            raise DataError(
                f"{path}, line {line}: the template {template!r} is already on line {earlier}{as_written}; a "
                f"repeated template would count twice in the US score and the preference disparity, so list it once"
            )
        first[same] = (line, template)
    for line, template, _ in rows:
        try:
            unstereo.fill_template(template, "male")
        except InputError as e:
            raise DataError(f"{path}, line {line}: {e}") from None
    frame = pd.DataFrame({"template": [t for _, t, _ in rows], "line": [line for line, _, _ in rows]})
    given = [p for _, _, p in rows]
    if any(p is None for p in given):
        frame["max_gender_pmi"] = unstereo.recompute_max_gender_pmi(frame["template"])
    else:
        frame["max_gender_pmi"] = given
    return frame


def _text_rows(text: str, source: str) -> list[tuple[int, str, None]]:
    if "\r" in text.replace("\r\n", ""):
        raise DataError(
            f"{source}: lines end in a bare carriage return (\\r, old Mac line ends), which would read as one "
            f"template; save the file with \\n (or \\r\\n) line ends"
        )
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows = []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix("\r")
        if not line.strip():
            raise DataError(f"{source}, line {number}: a blank line; remove it (one template a line)")
        rows.append((number, line, None))
    return rows


def _csv_rows(text: str, source: str) -> list[tuple[int, str, float | None]]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise DataError(f"{source}: the file is empty; its first row must name the column 'template'")
    header = [h.strip() for h in header]
    check_header(header, source)
    if "template" not in header:
        raise DataError(
            f"{source}, line 1: no column 'template' (the header has {header}); optional column: max_gender_pmi"
        )
    at, pmi_at = header.index("template"), header.index("max_gender_pmi") if "max_gender_pmi" in header else None
    rows = []
    for row in reader:
        line = reader.line_num
        if len(row) != len(header):
            what = "a blank row; remove it" if not row else f"{len(row)} fields, but the header has {len(header)}"
            raise DataError(f"{source}, line {line}: {what}")
        template = row[at]
        if not template.strip():
            raise DataError(f"{source}, line {line}: the template is empty")
        pmi = None
        if pmi_at is not None:
            try:
                pmi = float(row[pmi_at])
            except ValueError:
                raise DataError(f"{source}, line {line}: max_gender_pmi {row[pmi_at]!r} is not a number") from None
        rows.append((line, template, pmi))
    return rows
