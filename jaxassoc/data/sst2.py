"""SST-2 (Socher et al. 2013, EMNLP; GLUE, Wang et al. 2018): binary sentiment of movie-review phrases.

Only the validation split (GLUE ``SST-2/dev.tsv``) is packaged: 872 sentences, 444 positive (1) and
428 negative (0). Sentences are as GLUE and the HF ``glue/sst2`` split ship them: lower-cased,
PTB-tokenised, each ending with a space (kept, so that prompts match the original data; strip it in
the caller if wanted and record that).
"""

from __future__ import annotations

import pandas as pd

from jaxassoc.data._files import malformed_error, read_lines
from jaxassoc.errors import DataError

SST2_FILES: dict[str, str] = {"validation": "sst2/dev.tsv"}


def load_sst2(split: str = "validation") -> pd.DataFrame:
    """SST-2 as ``sentence`` (str) and ``label`` (int, 1 = positive), in file order."""
    if split not in SST2_FILES:
        raise DataError(f"SST-2 split {split!r} is not packaged; the packaged splits are {list(SST2_FILES)}")
    relative = SST2_FILES[split]
    lines = read_lines(relative)
    if not lines or lines[0].split("\t") != ["sentence", "label"]:
        raise malformed_error(relative, f"line 1 must be the header 'sentence<TAB>label', not {lines[:1]}")
    rows = [line.split("\t") for line in lines[1:]]
    for number, row in enumerate(rows, 2):
        if len(row) != 2 or row[1] not in ("0", "1"):
            raise malformed_error(
                relative, f"line {number} must be '<sentence><TAB><0 or 1>', not {lines[number - 1]!r}"
            )
    return pd.DataFrame({"sentence": [row[0] for row in rows], "label": [int(row[1]) for row in rows]})
