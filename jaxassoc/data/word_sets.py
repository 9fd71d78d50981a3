"""The word rule of every metric that takes word sets (WEAT, SC-WEAT, SEAT, CEAT, RPAM, WEFE): a word counted once.

Plain Python on the word lists, so a data file is checked as it is read (:mod:`jaxassoc.data.custom_weat`)
without importing the metrics; :mod:`jaxassoc.metrics.weat` applies it to every test it scores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxassoc.errors import InputError


def check_distinct_words(
    label: str,
    sets: Sequence[Sequence[str]],
    names: Sequence[str] = ("X", "Y", "A", "B"),
    key: Callable[[str], str] | None = None,
) -> None:
    """The word rule of every metric that takes word sets: InputError for a word repeated inside a set or
    found in two sets of one test (``label`` names the test; ``names`` the sets, targets first). ``key``
    maps a word to what the embedding looks up (e.g. lower-cased for GloVe): spellings with one key are
    one word, so ``rose`` and ``Rose`` would count the same vector twice."""
    key = key or (lambda word: word)

    def spelled(k: str) -> str:
        spellings = sorted({w for words in sets for w in words if key(w) == k})
        return repr(spellings[0]) if len(spellings) == 1 else f"{spellings} (one word to the lookup: {k!r})"

    for name, words in zip(names, sets):
        keys = [key(w) for w in words]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            merged = [k for k in repeated if len({w for w in words if key(w) == k}) > 1]
            shown = ", ".join(spelled(k) for k in merged) if merged else str(repeated)
            raise InputError(
                f"{label}: word set {name!r} repeats {shown}; a repeated word would count twice, so list each word once"
            )
    owner: dict[str, str] = {}
    for name, words in zip(names, sets):
        for word in words:
            if key(word) in owner:
                raise InputError(
                    f"{label}: word {spelled(key(word))} is in both {owner[key(word)]!r} and {name!r}; a word may "
                    f"belong to one set of a test only (a target that is also an attribute would score itself), "
                    f"so remove it from one side"
                )
            owner[key(word)] = name
