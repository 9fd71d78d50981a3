"""STS Benchmark (Cer et al. 2017, SemEval-2017 Task 1): sentence pairs with 0–5 similarity scores.

- ``dev``: GLUE ``STS-B/dev.tsv``, 1500 pairs (identical to the original ``sts-dev.csv``).
- ``test``: the original ``sts-test.csv``, 1379 pairs with gold scores (GLUE's test file has none).

The files contain unbalanced ``"`` characters, so they are split on tabs with no quote handling.
Scores are CC BY-SA 4.0; the sentences carry their sources' licences (``files/stsb/LICENSE.txt``).
"""

from __future__ import annotations

import pandas as pd

from jaxassoc.data._files import malformed_error, read_lines
from jaxassoc.errors import DataError

STSB_FILES: dict[str, str] = {"dev": "stsb/dev.tsv", "test": "stsb/original/sts-test.tsv"}

# Column positions: GLUE dev has a header (index, genre, filename, year, old_index, source1, source2,
# sentence1, sentence2, score); the original test file has none (genre, filename, year, id, score,
# sentence1, sentence2[, source fields]).
_COLUMNS = {
    "dev": {"genre": 1, "sentence1": 7, "sentence2": 8, "score": 9},
    "test": {"genre": 0, "sentence1": 5, "sentence2": 6, "score": 4},
}


def load_stsb(split: str = "dev") -> pd.DataFrame:
    """STS-B as ``sentence1, sentence2, score`` (float, 0–5) and ``genre``, in file order."""
    if split not in STSB_FILES:
        raise DataError(f"unknown STS-B split {split!r}; choose one of {list(STSB_FILES)}")
    relative, columns = STSB_FILES[split], _COLUMNS[split]
    first = 2 if split == "dev" else 1  # line number of the first row: dev has a header
    rows = [line.split("\t") for line in read_lines(relative)[first - 1 :]]
    needed = max(columns.values()) + 1
    for number, row in enumerate(rows, first):
        if len(row) < needed:
            raise malformed_error(relative, f"line {number} has {len(row)} tab-separated fields, not {needed} or more")
        score = row[columns["score"]]
        try:
            float(score)
        except ValueError:
            raise malformed_error(relative, f"line {number}: the score {score!r} is not a number") from None
    frame = pd.DataFrame({name: [row[i] for row in rows] for name, i in columns.items()})
    return frame[["sentence1", "sentence2", "score", "genre"]].astype({"score": "float64"})
