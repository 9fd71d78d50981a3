"""Bolukbasi et al. (2016)'s Hard Debias word lists, copied from ``tolga-b/debiaswe`` (MIT).

``files/debiaswe/`` (``SOURCE.md``): ``definitional_pairs.json`` (10 pairs that define the gender
direction, female word first), ``equalize_pairs.json`` (52 pairs made symmetric about it) and
``gender_specific_full.json`` (1,441 words that keep their gender component). The lists were written for
the cased word2vec vocabulary: they hold capitalised words (``Mary``, ``He``) and phrases
(``Catholic_priest``); ``jaxassoc.mitigation.hard_debias`` says how it looks them up.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxassoc.data._files import malformed_error, read_json

DEBIASWE_FILES: dict[str, str] = {
    "definitional_pairs": "debiaswe/definitional_pairs.json",
    "equalize_pairs": "debiaswe/equalize_pairs.json",
    "gender_specific": "debiaswe/gender_specific_full.json",
}


@dataclasses.dataclass(frozen=True)
class DebiasweLists:
    """The three lists, as in the files (case and order kept)."""

    definitional_pairs: tuple[tuple[str, str], ...]
    equalize_pairs: tuple[tuple[str, str], ...]
    gender_specific: tuple[str, ...]


def _pairs(key: str) -> tuple[tuple[str, str], ...]:
    relative = DEBIASWE_FILES[key]
    raw = read_json(relative)
    if not isinstance(raw, list):
        raise malformed_error(relative, "expected a JSON list of word pairs")
    for i, pair in enumerate(raw):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(w, str) and w for w in pair)):
            raise malformed_error(relative, f"entry {i} {pair!r} is not a pair of words")
    return tuple((a, b) for a, b in raw)


@functools.cache
def load_debiaswe_lists() -> DebiasweLists:
    """The packaged debiaswe lists; DataError naming the file if one is missing or malformed."""
    relative = DEBIASWE_FILES["gender_specific"]
    specific = read_json(relative)
    if not isinstance(specific, list) or not all(isinstance(w, str) and w for w in specific):
        raise malformed_error(relative, "expected a JSON list of words")
    return DebiasweLists(_pairs("definitional_pairs"), _pairs("equalize_pairs"), tuple(specific))
