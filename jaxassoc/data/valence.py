"""Valence data: the Bellezza norms and the WEAT pleasant/unpleasant words that RPAM Valence uses.

- Bellezza, Greenwald & Banaji (1986), "Words high and low in pleasantness as rated by male and female
  college students", Behav. Res. Methods 18(3):299–303: 399 words rated 1 (unpleasant) to 5 (pleasant).
  Canonical file: ValNorm's ``Bellezza_Lexicon.csv`` (``files/bellezza/SOURCE.md`` calls it primary);
  VAST's copy (MIT) ships alongside and holds the same words, order and values (checked in the tests).
- RPAM Valence (Hodel et al. 2026, §4, "analogous to SC-WEAT") scores a target against "the pleasant
  and unpleasant words from WEAT-WS": the 25 + 25 attribute words of WEAT-WS C1 (= Caliskan W1, with
  ``agony`` and ``prison`` among the unpleasant words, i.e. WEFE's ``unpleasant_5a``).
"""

from __future__ import annotations

import pandas as pd

from jaxassoc.data._files import read_csv
from jaxassoc.data.weat import weat_test

BELLEZZA_FILE = "bellezza/Bellezza_Lexicon.csv"
BELLEZZA_VAST_FILE = "bellezza/Bellezza_Lexicon_VAST.csv"


def load_bellezza() -> pd.DataFrame:
    """The 399 Bellezza words: ``word``, ``valence`` (= combined pleasantness, 1–5) and the original
    male/female pleasantness and frequency columns, in file order."""
    numbers = [f"{who}_{what}" for what in ("pleasantness", "frequency") for who in ("male", "female", "combined")]
    frame = read_csv(BELLEZZA_FILE, columns=["word", *numbers], numeric=numbers, index_col=0, keep_default_na=False)
    frame = frame.rename(columns={"combined_pleasantness": "valence"}).reset_index(drop=True)
    ordered = ["word", "valence"] + [c for c in frame.columns if c not in ("word", "valence")]
    return frame[ordered]


def valence_attributes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(pleasant, unpleasant)``: the 25 + 25 WEAT-WS attribute words of C1 (RPAM Valence)."""
    test = weat_test("weat_ws", "C1")
    return test.attributes_a, test.attributes_b
