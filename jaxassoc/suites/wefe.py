"""WEFE's queries on a WEAT suite (Badilla et al. 2020; docs/methods.md §9): each test (targets X, Y;
attributes A, B) is a query scored by RND, RNSB, MAC, ECT and RIPA (:mod:`jaxassoc.metrics.wefe`).

The metrics whose template takes one attribute set (RND, ECT, RIPA: (2, 1)) score the test's two
subqueries (X, Y wrt A) and (X, Y wrt B), as WEFE's ``Query.get_subqueries``; RNSB takes A as the positive
and B as the negative set ((n, 2)); MAC takes X ∪ Y against A and B ((n, n)).

Each row carries ``score`` (the metric as WEFE reports it) and ``effect_size``, the value whose absolute
value ranks models (WEFE ranks by |score|): the score itself for RND, RNSB and RIPA, 1 − MAC (a mean
cosine *distance*: 1 is no association) and 1 − ρ for ECT (ρ = 1 is no bias). ``series`` names the
metric and, for a subquery, its attribute set (``RND (A)``), so rankings compare like with like.

WEFE gives no uncertainty; with ``n_bootstrap`` > 0 each row gets a percentile CI of its ``effect_size``
(``ci_low``, ``ci_high``; for MAC and ECT, 1 − the score's bounds) from a bootstrap over words: every set the metric reads resampled within itself, the words
the units (RIPA's target pairs resampled as pairs; RNSB's holdout split the same in every resample).
A resample whose score is undefined (ECT's ρ when the resampled attribute words are all one word) is
left out of the interval and counted in ``ci_undefined`` (docs/methods.md §9.4).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.errors import InputError
from jaxassoc.metrics import wefe
from jaxassoc.metrics.weat import unit_rows
from jaxassoc.stats import StatsOptions
from jaxassoc.stats.bootstrap import bootstrap_ci_groups
from jaxassoc.stats.small_samples import caveat
from jaxassoc.suites.weat import VectorsFn, check_suite_words, looked_up, lookup_fn

METRICS = ("rnd", "rnsb", "mac", "ect", "ripa")
TITLES = {"rnd": "RND", "rnsb": "RNSB", "mac": "MAC", "ect": "ECT", "ripa": "RIPA"}


@dataclass(frozen=True)
class WefeOptions:
    """The metrics to run and WEFE's options (defaults: WEFE's)."""

    metrics: Sequence[str] = METRICS
    normalize: bool = False  # rows at unit length before every metric (WEFE's normalize)
    rnd_distance: str = "norm"
    rnsb_c: float = 1.0
    rnsb_holdout: bool = True
    rnsb_test_share: float = 0.2
    rnsb_iterations: int = 1
    n_bootstrap: int = 0  # resamples of the words for each score's CI (0: no CI, as WEFE)
    confidence: float = StatsOptions.confidence

    def settings(self, metric: str) -> dict:
        """The options a metric's rows record."""
        own = {"rnd": {"rnd_distance": self.rnd_distance}, "rnsb": self._rnsb()}.get(metric, {})
        ci = {"confidence": self.confidence} if self.n_bootstrap else {}  # n_bootstrap: each row's own
        return {"normalize": self.normalize, **own, **ci}

    def _rnsb(self) -> dict:
        return {
            "rnsb_c": self.rnsb_c,
            "rnsb_holdout": self.rnsb_holdout,
            "rnsb_test_share": self.rnsb_test_share if self.rnsb_holdout else np.nan,
            "rnsb_iterations": self.rnsb_iterations,
        }


def _lookup(test, lookup, source: str):
    """The test's four sets looked up; a set the vocabulary empties (or loses too much of) is named with its
    file (``source``) and test."""
    try:
        return looked_up(test, lookup)
    except InputError as e:
        raise InputError(f"{source}, test {test.id!r}: {e}") from None


def _checked(test, names, found, source: str, options: WefeOptions) -> list[np.ndarray]:
    """The gate of every metric the job runs: no empty set, one dimension; ECT needs two attribute words."""
    labels = [f"{test.id} {s} ({name})" for s, name in zip("XYAB", names)]
    need = 2 if "ect" in options.metrics else 1  # Spearman's rho needs two attribute words
    try:
        sets = wefe.check_query(
            {label: f.vectors for label, f in zip(labels, found)},
            min_words={labels[2]: need, labels[3]: need},
        )
    except InputError as e:
        raise InputError(f"{source}: {e}") from None
    vectors = list(sets.values())
    return [np.asarray(unit_rows(v)) for v in vectors] if options.normalize else vectors


def _row(suite, test, metric: str, role: str, names, kept, score: float, **extra) -> dict:
    """One query's row: its sets and sizes, the score and the value ranked."""
    attributes = {"A": names[2], "B": names[3], "A, B": f"{names[2]}, {names[3]}"}[role]
    effect = 1.0 - score if metric in ("mac", "ect") else score
    if metric in ("mac", "ect") and "ci_low" in extra:  # the CI is of effect_size, as every metric's
        extra = {**extra, "ci_low": 1.0 - extra["ci_high"], "ci_high": 1.0 - extra["ci_low"]}
    if "ci_low" in extra:  # sets of a handful of words: the word bootstrap is coarse (docs/methods.md §9.4)
        read = {"A": "XYA", "B": "XYB", "A, B": "XYAB"}[role]
        sizes = {s: len(k) for s, k in zip("XYAB", kept) if s in read}
        extra = {**extra, "caveat": caveat(sizes, ci=True)}
    return {
        "suite": suite.name,
        "test": test.id,
        "name": test.name,
        "metric": TITLES[metric],
        "attributes": role,
        "query": f"{names[0]} and {names[1]} wrt {attributes}",
        "series": TITLES[metric] + ("" if role == "A, B" else f" ({role})"),
        "score": score,
        "effect_size": effect,
        **{f"n_{s}": len(k) for s, k in zip("xyab", kept)},
        **extra,
    }


def _item(test, metric: str, role: str, set_name: str, word: str, value: float, sd: float = np.nan) -> dict:
    return {
        "test": test.id,
        "metric": TITLES[metric],
        "attributes": role,
        "set": set_name,
        "word": word,
        "value": value,
        "sd": sd,
    }


def _rnd_score(x, y, a, *, distance: str):
    return wefe.rnd(x, y, a, distance=distance).score


def _mac_score(x, y, a, b):
    return wefe.mac([x, y], [a, b])


def _ripa_score(pairs, a):
    return wefe.ripa(pairs[0], pairs[1], a).score


def _rnsb_score(x, y, a, b, *, seed: int, c: float, holdout: bool, test_share: float, iterations: int):
    key = jax.random.key(seed)  # one split for every resample: the words vary, not the split
    kw = dict(c=c, holdout=holdout, test_share=test_share, iterations=iterations)
    return wefe.rnsb(key, jnp.concatenate([x, y]), a, b, **kw).score


RNSB_MAX_RESAMPLES = 1_000
"""RNSB refits its classifier on every resample (50 Newton steps): its CI takes at most this many resamples
(enough for a 95 % percentile interval; Efron & Tibshirani 1993, §19.3), recorded in its row's
``n_bootstrap``; the other metrics take ``stats.n_bootstrap``."""


def _interval(statistic, groups: tuple, key: jax.Array | None, options: WefeOptions, most: int | None = None) -> dict:
    """``ci_low``, ``ci_high``, ``ci_undefined`` and ``n_bootstrap`` of ``statistic(*groups)`` by a bootstrap
    over the words of each group (module docstring), with at most ``most`` resamples; nothing without
    ``n_bootstrap``."""
    if not options.n_bootstrap or key is None:
        return {}
    n = min(options.n_bootstrap, most or options.n_bootstrap)
    found = bootstrap_ci_groups(key, statistic, groups, n_resamples=n, confidence=options.confidence)
    samples = np.asarray(found.samples, np.float64)
    undefined = int(np.isnan(samples).sum())
    if not undefined:
        return {"ci_low": float(found.low), "ci_high": float(found.high), "ci_undefined": 0, "n_bootstrap": n}
    # e.g. ECT's ρ on a resample whose attribute words are all one word: left out and counted
    tail = (1 - options.confidence) / 2
    low, high = np.nanquantile(samples, [tail, 1 - tail]) if undefined < len(samples) else (np.nan, np.nan)
    return {"ci_low": float(low), "ci_high": float(high), "ci_undefined": undefined, "n_bootstrap": n}


def _score_test(suite, test, sets, names, kept, key, options: WefeOptions):
    """The rows and per-word items of one test; ``key`` draws RNSB's splits, and a key folded from it the
    word bootstrap of each score (one per row)."""
    x, y, a, b = sets
    rows, items = [], []
    boot = iter(jax.random.split(jax.random.fold_in(key, 1), 8))  # 8 rows at most: RND, ECT, RIPA x 2, RNSB, MAC
    subqueries = (("A", a, names[2], kept[2]), ("B", b, names[3], kept[3]))
    if "rnd" in options.metrics:
        for role, attr, label, words in subqueries:
            r = wefe.rnd(x, y, attr, distance=options.rnd_distance)
            ci = _interval(
                functools.partial(_rnd_score, distance=options.rnd_distance), (x, y, attr), next(boot), options
            )
            rows.append(_row(suite, test, "rnd", role, names, kept, float(r.score), **ci, **options.settings("rnd")))
            items += [_item(test, "rnd", role, label, w, float(v)) for w, v in zip(words, r.per_word)]
    if "rnsb" in options.metrics:
        r = wefe.rnsb(
            key,
            np.concatenate([x, y]),
            a,
            b,
            c=options.rnsb_c,
            holdout=options.rnsb_holdout,
            test_share=options.rnsb_test_share,
            iterations=options.rnsb_iterations,
        )
        statistic = functools.partial(
            _rnsb_score,
            seed=int(jax.random.bits(key)),
            c=options.rnsb_c,
            holdout=options.rnsb_holdout,
            test_share=options.rnsb_test_share,
            iterations=options.rnsb_iterations,
        )
        ci = _interval(statistic, (x, y, a, b), next(boot), options, most=RNSB_MAX_RESAMPLES)
        extra = {"accuracy": float(r.accuracy), **options.settings("rnsb"), **ci}
        rows.append(_row(suite, test, "rnsb", "A, B", names, kept, float(r.score), **extra))
        target_sets = [names[0]] * len(kept[0]) + [names[1]] * len(kept[1])
        for set_name, word, p in zip(target_sets, [*kept[0], *kept[1]], r.negative_probabilities):
            items.append(_item(test, "rnsb", "A, B", set_name, word, float(p)))
    if "mac" in options.metrics:
        ci = _interval(_mac_score, (x, y, a, b), next(boot), options)
        score = float(wefe.mac([x, y], [a, b]))
        rows.append(_row(suite, test, "mac", "A, B", names, kept, score, **ci, **options.settings("mac")))
    if "ect" in options.metrics:
        for role, attr, _, _ in subqueries:
            ci = _interval(wefe.ect, (x, y, attr), next(boot), options)
            score = float(wefe.ect(x, y, attr))
            rows.append(_row(suite, test, "ect", role, names, kept, score, **ci, **options.settings("ect")))
    if "ripa" in options.metrics:
        n_pairs = min(len(x), len(y))  # pairs in listed order; the longer set's extra words are left out
        for role, attr, label, words in subqueries:
            r = wefe.ripa(x[:n_pairs], y[:n_pairs], attr)
            ci = _interval(_ripa_score, ((x[:n_pairs], y[:n_pairs]), attr), next(boot), options)
            extra = {"n_pairs": n_pairs, **ci, **options.settings("ripa")}
            rows.append(_row(suite, test, "ripa", role, names, kept, float(r.score), **extra))
            items += [
                _item(test, "ripa", role, label, w, float(m), float(s))
                for w, m, s in zip(words, r.per_word, r.per_word_sd)
            ]
    return rows, items


def run_wefe_suite(
    vectors: StaticEmbeddings | VectorsFn,
    suite,
    *,
    key: jax.Array,
    options: WefeOptions = WefeOptions(),
    max_oov_share: float = 0.2,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every test of ``suite`` as a WEFE query: ``(aggregates, items)``. Aggregates: one row per test and
    metric (and attribute set, for the (2, 1) metrics) with ``score``, ``effect_size`` (the value ranked),
    the set sizes, ``n_pairs`` (RIPA), ``accuracy`` (RNSB's classifier) and the lost words. Items: RND's
    and RIPA's value per attribute word (RIPA with its SD over pairs), RNSB's P(negative) per target word.
    RNSB's splits come from ``key``, one per test."""
    check_suite_words(suite.tests, getattr(vectors, "normalise", None))
    lookup = lookup_fn(vectors, max_oov_share)
    rows, items = [], []
    for test, test_key in zip(suite.tests, jax.random.split(key, len(suite.tests))):
        names, found = _lookup(test, lookup, suite.source)
        kept = [list(f.kept_words) for f in found]
        sets = _checked(test, names, found, suite.source, options)
        test_rows, test_items = _score_test(suite, test, sets, names, kept, test_key, options)
        lost = " ".join(w for f in found for w in f.lost_words)
        rows += [{**r, "lost_words": lost} for r in test_rows]
        items += test_items
    return pd.DataFrame(rows), pd.DataFrame(items)
