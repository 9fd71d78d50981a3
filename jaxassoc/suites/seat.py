"""SEAT (May et al. 2019; docs/methods.md §8): WEAT on sentence vectors of a suite's words slotted into
bleached templates (the sentences: :mod:`jaxassoc.readouts.seat`), each filled sentence one member of its set.

- :func:`run_seat_experiment`: one row per test from sentence vectors, with the WEAT columns of
  :func:`~jaxassoc.suites.weat.run_weat_experiment` (its permutation test, effect size and bootstrap CI)
  named without their ``_raw`` suffix, and ``effect_size``. ``unit="word"`` (``stats.unit=word``)
  resamples words, each with all its sentences, for the CI of d instead of single sentences
  (:func:`word_intervals`; docs/methods.md §8).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import numpy as np
import pandas as pd

from jaxassoc.data.seat import SeatTemplates
from jaxassoc.data.weat import WeatSuite
from jaxassoc.embeddings.static import Lookup
from jaxassoc.errors import InputError
from jaxassoc.metrics.weat import ClusteredEffectSize, associations
from jaxassoc.readouts.seat import named_sets, seat_suite
from jaxassoc.stats import StatsOptions
from jaxassoc.stats.bootstrap import bootstrap_ci_groups
from jaxassoc.stats.options import RESAMPLING_UNITS
from jaxassoc.suites.weat import run_weat_experiment

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


def run_seat_experiment(
    suite: WeatSuite,
    templates: SeatTemplates,
    vectors: Mapping[str, np.ndarray],
    *,
    key: jax.Array,
    options: StatsOptions = StatsOptions(),
    unit: str = "sentence",
) -> pd.DataFrame:
    """WEAT (:func:`~jaxassoc.suites.weat.run_weat_experiment`) of every test of ``seat_suite(suite,
    templates)`` with ``vectors[sentence]`` as each sentence's vector. Columns: ``d`` (= ``effect_size``),
    ``p_value``, ``ci_low``, ``ci_high``, ``S``, ``p_exact``, ``p_resamples``, ``undefined_reason``, the
    set sizes in sentences (``n_x`` ...) and in words (``words_x`` ...), the statistics options and
    ``ci_unit`` (what the CI resampled: ``unit``, one of :data:`~jaxassoc.stats.options.RESAMPLING_UNITS`)."""
    if unit not in RESAMPLING_UNITS:
        raise InputError(f"unit={unit!r}: SEAT's CI resamples one of {list(RESAMPLING_UNITS)}")

    def lookup(texts: Sequence[str], name: str) -> Lookup:
        if not texts:
            raise InputError(f"{name!r} is empty: give it at least one word")
        return Lookup(np.stack([vectors[t] for t in texts]), list(texts), [])

    table = run_weat_experiment(lookup, seat_suite(suite, templates), key=key, options=options)
    table = table.drop(columns=["lost_words", "coverage", "alpha", "whitening"]).rename(columns=RAW_COLUMNS)
    words = {f"words_{s}": [len(sets[i][1]) for sets in map(named_sets, suite.tests)] for i, s in enumerate("xyab")}
    if unit == "word":
        low, high = word_intervals(suite, templates, vectors, key=key, options=options)
        defined = table["d"].notna().to_numpy()
        table = table.assign(ci_low=np.where(defined, low, np.nan), ci_high=np.where(defined, high, np.nan))
    return table.assign(effect_size=table["d"], ci_unit=unit, **words)


def word_intervals(
    suite: WeatSuite, templates: SeatTemplates, vectors: Mapping[str, np.ndarray], *, key: jax.Array, options
) -> tuple[np.ndarray, np.ndarray]:
    """Per test, the bootstrap CI of d that resamples the target *words* of X and of Y, each with all of its
    sentences (May et al. 2019 resample none; a sentence-level CI treats a word's k sentences as k
    independent draws): the stratified bootstrap of :func:`~jaxassoc.stats.bootstrap.bootstrap_ci_groups`
    over words, with :func:`~jaxassoc.metrics.weat.clustered_effect_size` as the statistic; A and B stay
    fixed, as in WEAT. Each test's key is folded from the one its sentence-level test gets."""
    lows, highs = [], []
    for test, test_key in zip(suite.tests, jax.random.split(key, len(suite.tests))):
        a, b = (np.stack([vectors[t] for w in words for t in templates.sentences(w)]) for words in (
            test.attributes_a, test.attributes_b))  # fmt: skip
        clustered = []
        for words in (test.targets_x, test.targets_y):
            counts = [len(templates.sentences(w)) for w in words]
            every = np.stack([vectors[t] for w in words for t in templates.sentences(w)])
            s = np.asarray(associations(every, a, b))  # one call per set, not one per word (one shape each)
            per_word = np.split(s, np.cumsum(counts)[:-1])
            k = max(counts)
            scores = np.zeros((len(words), k), np.float32)
            mask = np.zeros((len(words), k), np.float32)
            for row, values in enumerate(per_word):
                scores[row, : len(values)], mask[row, : len(values)] = values, 1.0
            clustered.append((scores, mask))
        found = bootstrap_ci_groups(
            jax.random.fold_in(test_key, 1),
            ClusteredEffectSize(options.ddof),
            tuple(clustered),
            n_resamples=options.n_bootstrap,
            confidence=options.confidence,
            alternative=options.alternative,
        )
        lows.append(float(found.low))
        highs.append(float(found.high))
    return np.array(lows), np.array(highs)
