"""SEAT (May et al. 2019; docs/methods.md §8): WEAT on sentence vectors of a suite's words slotted into
bleached templates (:mod:`jaxassoc.data.seat`), each filled sentence one member of its set.

- :func:`check_encodable`: InputError naming the test, set and word when a word tokenises to the
  encoder's unknown token (run before any forward pass).
- :func:`seat_suite`: the sentence version of a WEAT suite (same ids, names and set labels).
- :func:`run_seat_experiment`: one row per test from sentence vectors, with the WEAT columns of
  :func:`~jaxassoc.readouts.weat.run_weat_experiment` (its permutation test, effect size and bootstrap CI)
  named without their ``_raw`` suffix, and ``effect_size``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
import pandas as pd

from jaxassoc.data.seat import SeatTemplates
from jaxassoc.data.weat import WeatSuite
from jaxassoc.embeddings.static import Lookup
from jaxassoc.errors import InputError
from jaxassoc.readouts.weat import run_weat_experiment
from jaxassoc.stats import StatsOptions

RAW_COLUMNS = {
    "d_raw": "d",
    "p_raw": "p_value",
    "S_raw": "S",
    "ci_low_raw": "ci_low",
    "ci_high_raw": "ci_high",
    "p_exact_raw": "p_exact",
    "p_resamples_raw": "p_resamples",
    "undefined_reason_raw": "undefined_reason",
}


def _sets(test) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return (
        (test.x_name, test.targets_x),
        (test.y_name, test.targets_y),
        (test.a_name, test.attributes_a),
        (test.b_name, test.attributes_b),
    )


def check_encodable(tests: Sequence[Any], tokenizer: Any) -> None:
    """InputError for the first word (test, set, word) that the tokenizer turns into its unknown token, in
    whole or in part: the encoder would see ``[UNK]`` instead of the word. A tokenizer without an unknown
    token (byte-level BPE) represents every word."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is None:
        return
    for test in tests:
        for name, words in _sets(test):
            for word in words:
                if unk in tokenizer(word, add_special_tokens=False)["input_ids"]:
                    raise InputError(
                        f"test {test.id}: word set {name!r}: the encoder cannot represent {word!r} (it tokenises "
                        f"to the unknown token {tokenizer.unk_token!r}); remove the word or use a model whose "
                        f"vocabulary covers it"
                    )


def seat_suite(suite: WeatSuite, templates: SeatTemplates) -> WeatSuite:
    """The suite with every word replaced by its filled templates (:meth:`SeatTemplates.sentences`), in
    word order: a set of n words of one form with k templates holds n·k sentences."""

    def fill(words: Sequence[str]) -> tuple[str, ...]:
        return tuple(s for w in words for s in templates.sentences(w))

    tests = tuple(
        dataclasses.replace(
            t,
            targets_x=fill(t.targets_x),
            targets_y=fill(t.targets_y),
            attributes_a=fill(t.attributes_a),
            attributes_b=fill(t.attributes_b),
        )
        for t in suite.tests
    )
    return WeatSuite(suite.name, tests, suite.source)


def run_seat_experiment(
    suite: WeatSuite,
    templates: SeatTemplates,
    vectors: Mapping[str, np.ndarray],
    *,
    key: jax.Array,
    options: StatsOptions = StatsOptions(),
) -> pd.DataFrame:
    """WEAT (:func:`~jaxassoc.readouts.weat.run_weat_experiment`) of every test of ``seat_suite(suite,
    templates)`` with ``vectors[sentence]`` as each sentence's vector. Columns: ``d`` (= ``effect_size``),
    ``p_value``, ``ci_low``, ``ci_high``, ``S``, ``p_exact``, ``p_resamples``, ``undefined_reason``, the
    set sizes in sentences (``n_x`` ...) and in words (``words_x`` ...), and the statistics options."""

    def lookup(texts: Sequence[str], name: str) -> Lookup:
        if not texts:
            raise InputError(f"{name!r} is empty: give it at least one word")
        return Lookup(np.stack([vectors[t] for t in texts]), list(texts), [])

    table = run_weat_experiment(lookup, seat_suite(suite, templates), key=key, options=options)
    table = table.drop(columns=["lost_words", "coverage", "alpha", "whitening"]).rename(columns=RAW_COLUMNS)
    words = {f"words_{s}": [len(sets[i][1]) for sets in map(_sets, suite.tests)] for i, s in enumerate("xyab")}
    return table.assign(effect_size=table["d"], **words)
