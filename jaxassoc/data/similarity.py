"""Word-similarity benchmarks with human scores.

- WordSim-353 (Finkelstein et al. 2002, ACM TOIS 20(1)), original ``wordsim353.zip`` files: 0–10
  relatedness. All 353 rows are kept as published, including the original file's quirks
  (``money,cash`` twice, both ``bank,money`` and ``money,bank``): 352 distinct ordered pairs. Deduplicate
  in the caller if a method needs unique pairs, and say so.
- SimLex-999 (Hill, Reichart & Korhonen 2015, Computational Linguistics 41(4)): 0–10 similarity.
"""

from __future__ import annotations

import pandas as pd

from jaxassoc.data._files import read_csv
from jaxassoc.errors import DataError

WORDSIM353_SUBSETS: dict[str, str] = {
    "combined": "wordsim353/combined.csv",  # 353 pairs
    "set1": "wordsim353/set1.csv",  # 153 pairs, 13 raters
    "set2": "wordsim353/set2.csv",  # 200 pairs, 16 raters
}
SIMLEX999_FILE = "simlex999/SimLex-999.txt"
_WORDSIM353_COLUMNS = ["Word 1", "Word 2", "Human (mean)"]
_SIMLEX999_NUMBERS = ["SimLex999", "conc(w1)", "conc(w2)", "concQ", "Assoc(USF)", "SimAssoc333", "SD(SimLex)"]


def load_wordsim353(subset: str = "combined") -> pd.DataFrame:
    """WordSim-353 as ``word1, word2, score`` (the mean human rating), in file order."""
    if subset not in WORDSIM353_SUBSETS:
        raise DataError(f"unknown WordSim-353 subset {subset!r}; choose one of {list(WORDSIM353_SUBSETS)}")
    raw = read_csv(
        WORDSIM353_SUBSETS[subset], columns=_WORDSIM353_COLUMNS, numeric=["Human (mean)"], keep_default_na=False
    )
    frame = raw.rename(columns={"Word 1": "word1", "Word 2": "word2", "Human (mean)": "score"})
    return frame[["word1", "word2", "score"]].astype({"score": "float64"})


def load_simlex999() -> pd.DataFrame:
    """SimLex-999 as ``word1, word2, pos, score`` (the SimLex999 column) plus the original extra columns
    (``conc(w1)``, ``conc(w2)``, ``concQ``, ``Assoc(USF)``, ``SimAssoc333``, ``SD(SimLex)``)."""
    raw = read_csv(
        SIMLEX999_FILE,
        columns=["word1", "word2", "POS", *_SIMLEX999_NUMBERS],
        numeric=_SIMLEX999_NUMBERS,
        sep="\t",
        keep_default_na=False,
    )
    return raw.rename(columns={"POS": "pos", "SimLex999": "score"})
