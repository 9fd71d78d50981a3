"""ZCA-WEAT Experiments 1-3 (ZCA-WEAT paper §4.3) as plain functions of word vectors (the app draws the
paper's figures: :mod:`jaxassoc.app.tasks.weat`).

- :func:`run_weat_experiment` (Experiment 3): d and p of every test of a suite, raw and whitened, and
  the significance change class at p < alpha.
- :func:`run_sc_weat_experiment`: SC-WEAT d and p of every target word of a suite (``metric.single_category``).
- :func:`run_anisotropy` (Experiment 1): mean ± SD pairwise cosine of 2,000 random reference vectors and
  the explained-variance spectrum, before and after whitening.
- :func:`run_similarity_benchmark` (Experiment 2): Spearman rho of cosine vs human scores, raw vs
  whitened, with a paired bootstrap; :func:`similarity_row` for any pair vectors (a contextual model's),
  :func:`static_stsb` for STS-B's sentences as mean word vectors.
- :func:`check_suite_words`: the word rule on every test of a suite, before any model is loaded.

Vectors come from a :class:`~jaxassoc.embeddings.static.StaticEmbeddings` or any ``vectors_fn(words,
name) -> Lookup`` (e.g. contextual word vectors, extracted through the on-disk cache by
:mod:`jaxassoc.readouts.vectors`). No Hydra here: ``metric=weat`` (:mod:`jaxassoc.app.tasks.weat`) wires these
into its config.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence

import jax
import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.embeddings.static import Lookup, StaticEmbeddings
from jaxassoc.embeddings.whitening import ZcaStats, apply_zca
from jaxassoc.errors import InputError
from jaxassoc.metrics.anisotropy import (
    explained_variance_ratio,
    pairwise_cosine,
    sample_rows,
)
from jaxassoc.metrics.similarity import compare_whitening
from jaxassoc.metrics.weat import UNDEFINED_CONSTANT_S, check_distinct_words, sc_weat, weat
from jaxassoc.stats import StatsOptions, small_samples

log = logging.getLogger("jaxassoc")

VectorsFn = Callable[[Sequence[str], str], Lookup]

CHANGE_CLASSES = ("Stable", "Disappearing", "Emerging", "Not significant", "Undefined")
"""Stable: p < alpha raw and whitened; Disappearing: raw only; Emerging: whitened only; Not
significant: neither; Undefined: a p is NaN (s constant, see ``undefined_reason_*``), never counted
as significant or stable. The paper counts "Not significant" as "Stable" (significance unchanged): its
Table A1 marks e.g. GloVe W10 (p .069 -> .229) with S. Column ``paper_class`` follows the paper."""


def looked_up(test, lookup) -> tuple[tuple[str, ...], list]:
    """The names of a test's four sets (X, Y, A, B) and each set looked up (its kept words and vectors)."""
    names = (test.x_name, test.y_name, test.a_name, test.b_name)
    sets = (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)
    return names, [lookup(list(words), f"{test.id} {name}") for words, name in zip(sets, names)]


def lookup_fn(vectors: StaticEmbeddings | VectorsFn, max_oov_share: float) -> VectorsFn:
    """``vectors_fn(words, name) -> Lookup``: static vectors refuse a set losing more than ``max_oov_share``
    of its words; a contextual ``vectors_fn`` applies its own fallback."""
    if isinstance(vectors, StaticEmbeddings):
        return lambda words, name: vectors.lookup(words, max_oov_share=max_oov_share, name=name)
    return vectors


def change_class(p_raw: float, p_whitened: float, alpha: float = 0.05) -> str:
    """The significance change class of one (model, test) at ``alpha`` (see ``CHANGE_CLASSES``)."""
    if np.isnan(p_raw) or np.isnan(p_whitened):
        return "Undefined"
    raw, white = p_raw < alpha, p_whitened < alpha
    return ("Not significant", "Emerging", "Disappearing", "Stable")[2 * raw + white]


def check_suite_words(tests, key: Callable[[str], str] | None = None) -> None:
    """The word rule (:func:`~jaxassoc.metrics.weat.check_distinct_words`) on every test of a suite, as
    listed, with ``key`` the embedding's lookup key of a word (None: the word itself): run it before any
    model is loaded."""
    for test in tests:
        check_distinct_words(
            f"test {test.id}",
            (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b),
            (test.x_name, test.y_name, test.a_name, test.b_name),
            key,
        )


def small_test_columns(
    label: str, sizes: dict[str, int], n_permuted: tuple[int, int] | None, p_min: float | None, *, ci: bool
) -> dict:
    """``p_min`` (the smallest p the test can report; None: no permutation p) and ``caveat``
    (:func:`jaxassoc.stats.small_samples.caveat`, logged as a warning naming ``label`` when not empty)."""
    text = small_samples.caveat(sizes, n_permuted, p_min, ci=ci)
    if text:
        log.warning("%s: %s", label, text)
    return ({} if p_min is None else {"p_min": p_min}) | {"caveat": text}


def _closer_set(d: float, a: str, b: str) -> str:
    """The attribute set an SC-WEAT word is closer to: A for d > 0, B for d < 0 (none for 0 or NaN)."""
    return a if d > 0 else b if d < 0 else ""


def _result_columns(prefix: str, res) -> dict:
    return {
        f"d_{prefix}": float(res.d),
        f"p_{prefix}": float(res.p_value),
        f"S_{prefix}": float(res.S),
        f"ci_low_{prefix}": float(res.ci_low),
        f"ci_high_{prefix}": float(res.ci_high),
        f"p_exact_{prefix}": bool(res.exact),
        f"p_resamples_{prefix}": int(res.n_resamples),
        f"undefined_reason_{prefix}": "" if bool(res.defined) else UNDEFINED_CONSTANT_S,
    }


def run_weat_experiment(
    vectors: StaticEmbeddings | VectorsFn,
    suite,
    *,
    key: jax.Array,
    whitening: ZcaStats | None = None,
    whitening_description: str = "",
    options: StatsOptions = StatsOptions(),
    alpha: float = 0.05,
    max_oov_share: float = 0.2,
) -> pd.DataFrame:
    """Experiment 3: one row per test of ``suite`` (a :class:`~jaxassoc.data.weat.WeatSuite`).

    Columns: test id and name, set sizes after OOV removal, lost words and coverage; ``d_raw``,
    ``p_raw``, ``S_raw``, bootstrap CI, p method and ``undefined_reason_raw`` (empty unless d, p and
    CI are NaN); with ``whitening`` the same ``*_whitened`` columns and ``change`` / ``paper_class``;
    and the settings used. Raw and whitened tests share their PRNG key, so they see the same
    permutations and bootstrap resamples. The word rule (:func:`check_suite_words`) is checked first.
    """
    check_suite_words(suite.tests, getattr(vectors, "normalise", None))
    lookup = lookup_fn(vectors, max_oov_share)
    rows = []
    for test, test_key in zip(suite.tests, jax.random.split(key, len(suite.tests))):
        names, found = looked_up(test, lookup)
        kept = tuple(f.kept_words for f in found)
        settings = dict(words=kept, names=names, options=options)
        row = {
            "suite": suite.name,
            "test": test.id,
            "name": test.name,
            **{f"n_{s}": len(k) for s, k in zip("xyab", kept)},
            "lost_words": " ".join(w for f in found for w in f.lost_words),
            "coverage": sum(map(len, kept)) / sum(len(f.kept_words) + len(f.lost_words) for f in found),
            **_result_columns("raw", weat(test_key, *(f.vectors for f in found), **settings)),
        }
        sizes = dict(zip("XYAB", map(len, kept)))
        n_permuted = (len(kept[0]), len(kept[1]))
        small = small_test_columns(
            f"test {test.id}", sizes, n_permuted, options.smallest_p(sum(n_permuted), n_permuted[0]), ci=True
        )
        if whitening is not None:
            white = [np.asarray(apply_zca(whitening, f.vectors)) for f in found]
            row.update(_result_columns("whitened", weat(test_key, *white, **settings)))
            row["change"] = change_class(row["p_raw"], row["p_whitened"], alpha)
            row["paper_class"] = "Stable" if row["change"] == "Not significant" else row["change"]
        row.update(
            **small,
            alpha=alpha,
            **options.as_dict(),
            whitening=whitening_description if whitening is not None else "none",
        )
        rows.append(row)
    return pd.DataFrame(rows)


def run_sc_weat_experiment(
    vectors: StaticEmbeddings | VectorsFn,
    suite,
    *,
    key: jax.Array,
    options: StatsOptions = StatsOptions(),
    max_oov_share: float = 0.2,
) -> pd.DataFrame:
    """SC-WEAT (docs/methods.md §2.4) of every target word of every test of ``suite`` against the test's
    A and B: one row per word with d, its permutation p over re-partitions of A ∪ B (the words of a test
    share the partitions, drawn with the test's key) and the settings used."""
    check_suite_words(suite.tests, getattr(vectors, "normalise", None))
    lookup = lookup_fn(vectors, max_oov_share)
    rows = []
    for test, test_key in zip(suite.tests, jax.random.split(key, len(suite.tests))):
        names, found = looked_up(test, lookup)
        words = (*found[0].kept_words, *found[1].kept_words)
        targets = np.concatenate([found[0].vectors, found[1].vectors])
        res = sc_weat(
            test_key,
            targets,
            found[2].vectors,
            found[3].vectors,
            words=(words, found[2].kept_words, found[3].kept_words),
            names=(f"{names[0]} ∪ {names[1]}", *names[2:]),
            options=options,
        )
        n_x = len(found[0].kept_words)
        n_permuted = (len(found[2].kept_words), len(found[3].kept_words))
        small = small_test_columns(
            f"SC-WEAT {test.id}",
            dict(zip("AB", n_permuted)),
            n_permuted,
            options.smallest_p(sum(n_permuted), n_permuted[0]),
            ci=False,
        )
        for i, word in enumerate(words):
            rows.append(
                {
                    "suite": suite.name,
                    "test": test.id,
                    "name": test.name,
                    "set": names[0] if i < n_x else names[1],
                    "word": word,
                    "n_a": len(found[2].kept_words),
                    "n_b": len(found[3].kept_words),
                    "associated_with": _closer_set(float(res.d[i]), names[2], names[3]),
                    "d": float(res.d[i]),
                    "p": float(res.p_value[i]),
                    "p_exact": bool(res.exact),
                    "p_resamples": int(res.n_resamples),
                    **small,
                    "undefined_reason": "" if bool(res.defined[i]) else "cos(w, ·) is the same for every attribute",
                    "lost_words": " ".join(w for f in found for w in f.lost_words),
                    **options.permutation_dict(),
                }
            )
    return pd.DataFrame(rows)


def run_anisotropy(key: jax.Array, reference: np.ndarray, whitening: ZcaStats, *, n_samples: int = 2000) -> dict:
    """Experiment 1 on ``n_samples`` random rows of the reference vectors (the same rows raw and
    whitened): mean ± SD pairwise cosine and the explained-variance ratio spectrum."""
    sample = np.asarray(sample_rows(key, reference, n_samples))
    white = np.asarray(apply_zca(whitening, sample))
    raw_stats, white_stats = pairwise_cosine(sample), pairwise_cosine(white)
    return {
        "n_samples": sample.shape[0],
        "mean_raw": float(raw_stats.mean),
        "sd_raw": float(raw_stats.sd),
        "mean_whitened": float(white_stats.mean),
        "sd_whitened": float(white_stats.sd),
        "explained_variance_raw": np.asarray(explained_variance_ratio(reference)),
        "explained_variance_whitened": np.asarray(explained_variance_ratio(apply_zca(whitening, reference))),
    }


def run_similarity_benchmark(
    embeddings: StaticEmbeddings,
    pairs: pd.DataFrame,
    whitening: ZcaStats,
    *,
    key: jax.Array,
    name: str,
    n_resamples: int = StatsOptions.n_bootstrap,
    confidence: float = StatsOptions.confidence,
) -> dict:
    """Experiment 2 for a word-pair benchmark (``word1, word2, score``): pairs with an OOV word are
    dropped and counted; all pairs are kept as published (WS-353's duplicate rows included)."""
    keep = [w1 in embeddings and w2 in embeddings for w1, w2 in zip(pairs.word1, pairs.word2)]
    kept = pairs[keep]
    if len(kept) < 3:
        raise InputError(f"{name}: only {len(kept)} pairs have both words in {embeddings.source}")
    u = embeddings.lookup(list(kept.word1), oov="error", name=f"{name} word1").vectors
    v = embeddings.lookup(list(kept.word2), oov="error", name=f"{name} word2").vectors
    res = compare_whitening(
        key,
        (u, v),
        (apply_zca(whitening, u), apply_zca(whitening, v)),
        kept.score.to_numpy(np.float32),
        n_resamples=n_resamples,
        confidence=confidence,
    )
    return {
        "benchmark": name,
        "n_pairs": len(kept),
        "n_dropped": len(pairs) - len(kept),
        **{field: float(value) for field, value in res._asdict().items() if field != "n_pairs"},
        "n_resamples": n_resamples,
    }


def _words(sentence: str) -> list[str]:
    return re.findall(r"[a-z]+(?:'[a-z]+)?", sentence.lower())


def similarity_row(name: str, key, raw, whitened, human, n_dropped: int, stats_cfg) -> dict:
    """One similarity benchmark's row: Spearman rho of the pairs' cosines with the ``human`` scores, raw and
    whitened, and the paired bootstrap of their difference (:func:`~jaxassoc.metrics.similarity.compare_whitening`;
    ``stats_cfg``: its ``n_bootstrap`` and ``confidence``)."""
    r = compare_whitening(
        key,
        raw,
        whitened,
        np.asarray(human, np.float32),
        n_resamples=stats_cfg.n_bootstrap,
        confidence=stats_cfg.confidence,
    )
    return {
        "test": "similarity",
        "benchmark": name,
        "n_pairs": int(r.n_pairs),
        "n_dropped": n_dropped,
        **{f: float(v) for f, v in r._asdict().items() if f != "n_pairs"},
        "n_resamples": stats_cfg.n_bootstrap,
    }


def static_stsb(embeddings, zca, key, stats_cfg) -> dict:
    """STS-B dev: a sentence is the mean of its in-vocabulary word vectors (whitened: of the whitened ones).
    Pairs where a sentence has no in-vocabulary word are dropped and counted."""
    pairs = data.load_stsb("dev")
    sides = [[[w for w in _words(t) if w in embeddings] for t in pairs[c]] for c in ("sentence1", "sentence2")]
    keep = np.array([bool(a) and bool(b) for a, b in zip(*sides)])
    vocabulary = sorted({w for side in sides for words in side for w in words})
    raw_rows = embeddings.lookup(vocabulary, oov="error").vectors
    white_rows = np.asarray(apply_zca(zca, raw_rows))  # one whitening call for every word used
    row = {w: i for i, w in enumerate(vocabulary)}

    def mean_vectors(matrix, side):
        return np.stack([matrix[[row[w] for w in words]].mean(axis=0) for words, k in zip(side, keep) if k])

    raw = tuple(mean_vectors(raw_rows, side) for side in sides)
    white = tuple(mean_vectors(white_rows, side) for side in sides)
    return similarity_row("STS-B", key, raw, white, pairs["score"][keep], int((~keep).sum()), stats_cfg)
