"""SST-2 (Socher et al. 2013, EMNLP; GLUE, Wang et al. 2018): binary sentiment of movie-review phrases.

Only the validation split (GLUE ``SST-2/dev.tsv``) is packaged: 872 sentences, 444 positive (1) and
428 negative (0). Sentences are as GLUE and the HF ``glue/sst2`` split ship them: lower-cased,
PTB-tokenised, each ending with a space (kept, so that prompts match the original data; strip it in
the caller if wanted and record that).
"""

from __future__ import annotations

import pandas as pd

from jaxassoc.data._files import read_lines
from jaxassoc.errors import DataError

SST2_FILES: dict[str, str] = {"validation": "sst2/dev.tsv"}


def load_sst2(split: str = "validation") -> pd.DataFrame:
    """SST-2 as ``sentence`` (str) and ``label`` (int, 1 = positive), in file order."""
    if split not in SST2_FILES:
        raise DataError(f"SST-2 split {split!r} is not packaged; the packaged splits are {list(SST2_FILES)}")
    lines = read_lines(SST2_FILES[split])
    header, rows = lines[0].split("\t"), [line.split("\t") for line in lines[1:]]
    if header != ["sentence", "label"] or any(len(row) != 2 for row in rows):
        raise DataError(f"{SST2_FILES[split]} is malformed: expected two tab-separated columns")
    return pd.DataFrame({"sentence": [row[0] for row in rows], "label": [int(row[1]) for row in rows]})
