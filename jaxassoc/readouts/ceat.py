"""CEAT on a WEAT suite with a language model's contextual embeddings (Guo & Caliskan 2021; Cao et al.
2022, §3.1; docs/methods.md §3). Plain functions, no Hydra.

Per-word context pool (what :func:`context_pools` builds): the reference corpus (WikiText-2 test +
valid, offline, or a text file) is indexed by :class:`~jaxassoc.embeddings.contextual.ContextIndex`
(sentences of 7–75 whitespace tokens); each word gets up to ``max_contexts`` sentences that contain it
as a whole, case-sensitive token, drawn with ``context_seed`` (independent of the job seed, so a rerun
with another seed or N reuses the cached pools). In each sentence the word's subword tokens (those
overlapping its first occurrence) are mean-pooled in ``layer``: one embedding per (word, sentence).
The original CEAT samples Reddit comments; WikiText-2 is small, so many words (names in particular)
have few contexts: the count is recorded per word.

A word with no context in the corpus gets the WEAT job's fallback (recorded per word in ``how``):
``"word"`` (the word alone, one "context"), ``"templates"`` (the five bleached templates, five
contexts) or ``"drop"`` (left out; a set that loses more than ``max_oov_share`` of its words is refused).

:func:`run_ceat_suite` then runs the kernel :func:`jaxassoc.metrics.ceat.ceat` per test: N draws of one
random context per word (PRNG key folded with the test's position in the suite, so a subset of tests
gives the same numbers), the DerSimonian–Laird combined effect size, its variance, τ² and the p of
``alternative`` (one-sided "greater" by default), plus per-draw summaries and the draws themselves. A
test whose combination is undefined (a draw whose s is constant) has NaN CES and p and says why in
``undefined_reason``. The word rule of every metric (:func:`jaxassoc.metrics.weat.check_distinct_words`)
holds for the tests' sets.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import numpy as np
import pandas as pd
from jaxtyping import Float

from jaxassoc import data
from jaxassoc.embeddings.contextual import BLEACHED_TEMPLATES, ContextIndex
from jaxassoc.embeddings.sentence import token_states
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.metrics.ceat import ceat, pad_contexts
from jaxassoc.metrics.weat import check_distinct_words
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.weat import small_test_columns
from jaxassoc.stats.options import DEFAULT_ALTERNATIVE

FALLBACKS = ("word", "templates", "drop")
UNDEFINED_DRAWS = (
    "in a draw the association s(w, A, B) is the same for every target of X ∪ Y up to float "
    "rounding (its effect size is 0/0): CES, its variance and p are undefined"
)
DRAW_QUANTILES = (0.025, 0.5, 0.975)


class ContextPools(NamedTuple):
    """Every word's contextual embeddings, concatenated: word i owns rows ``offsets[i]:offsets[i+1]``."""

    words: list[str]
    vectors: Float[np.ndarray, "rows D"]
    counts: np.ndarray  # (words,) int: embeddings per word (0: dropped)
    how: list[str]  # "12 contexts" | "no context: fallback word" | "no context: dropped"

    def of(self, word: str) -> Float[np.ndarray, "n D"]:
        i = self.words.index(word)
        start = int(self.counts[:i].sum())
        return self.vectors[start : start + int(self.counts[i])]

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {
            "words": np.asarray(self.words),
            "vectors": self.vectors,
            "counts": self.counts,
            "how": np.asarray(self.how),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "ContextPools":
        return cls(
            [str(w) for w in arrays["words"]], arrays["vectors"], arrays["counts"], [str(h) for h in arrays["how"]]
        )


def corpus_sentences(corpus: str) -> tuple[list[str], str]:
    """Reference-corpus sentences (WikiText-2 test + valid, or the non-empty lines of a text file) and a
    description with the sha256 of their text (part of the cache key)."""
    if corpus == "wikitext2":
        sentences, name = (
            data.wikitext2_sentences("test") + data.wikitext2_sentences("valid"),
            "WikiText-2 (test+valid)",
        )
    else:
        path = Path(corpus).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"metric.corpus={corpus!r}: no such file; use wikitext2 or a text file, one sentence a line"
            )
        sentences = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        name = str(path)
    digest = hashlib.sha256("\n".join(sentences).encode()).hexdigest()
    return sentences, f"{name} sha256:{digest}"


def _span(text: str, word: str) -> tuple[int, int]:
    """Characters of the first whole-token occurrence of ``word`` in ``text`` (the whole text if none)."""
    pos = 0
    for token in text.split(" "):
        if token == word:
            return pos, pos + len(token)
        pos += len(token) + 1
    start = text.find(word)
    return (start, start + len(word)) if start >= 0 else (0, len(text))


def _plan(index: ContextIndex, word: str, max_contexts: int, seed: int, fallback: str) -> tuple[list[str], str]:
    contexts = index.contexts(word, max_contexts=max_contexts, seed=seed)
    if contexts:
        return contexts, f"{len(contexts)} corpus contexts"
    if fallback == "drop":
        return [], "no context: dropped"
    return (
        [word] if fallback == "word" else [t.format(word) for t in BLEACHED_TEMPLATES]
    ), f"no context: fallback {fallback}"


def context_pools(
    model: LanguageModel,
    index: ContextIndex,
    words: Sequence[str],
    *,
    layer: int = -1,
    max_contexts: int = 100,
    seed: int = 0,
    fallback: str = "word",
    batch_size: int = 32,
) -> ContextPools:
    """One embedding per (word, context sentence): ``layer``'s states mean-pooled over the word's subword
    tokens, all sentences of all words in one batched run (see the module docstring)."""
    if fallback not in FALLBACKS:
        raise ConfigError(f"CEAT fallback {fallback!r}: use one of {list(FALLBACKS)}")
    if max_contexts < 1:
        raise ConfigError(f"CEAT max_contexts={max_contexts}: it must be at least 1")
    words = list(dict.fromkeys(words))
    plans = [_plan(index, w, max_contexts, seed, fallback) for w in words]
    texts = [t for contexts, _ in plans for t in contexts]
    spans = [_span(t, w) for w, (contexts, _) in zip(words, plans) for t in contexts]
    if not texts:
        raise InputError(f"CEAT: none of the {len(words)} words has a context and the fallback is 'drop'")
    states, offsets = token_states(model, texts, layer=layer, batch_size=batch_size)
    rows = []
    for text, state, offset, (lo, hi) in zip(texts, states, offsets, spans):
        tokens = [t for t, (a, b) in enumerate(offset) if b > a and a < hi and b > lo]
        if not tokens:
            raise InputError(
                f"CEAT: no token of {text[:80]!r} covers characters {lo}..{hi} (truncated by the "
                f"model's context?); lower metric.max_contexts or use a corpus of shorter sentences"
            )
        rows.append(state[tokens].mean(axis=0))
    return ContextPools(
        words,
        np.stack(rows).astype(np.float32),
        np.array([len(c) for c, _ in plans], np.int32),
        [how for _, how in plans],
    )


def _set_of(pools: ContextPools, words: Sequence[str], label: str, max_oov_share: float):
    kept = [w for w in words if pools.counts[pools.words.index(w)] > 0]
    lost = [w for w in words if w not in kept]
    if len(lost) > max_oov_share * len(words):
        raise InputError(
            f"CEAT {label}: {len(lost)} of {len(words)} words have no context and were dropped "
            f"({lost}), more than max_oov_share={max_oov_share}; use fallback word or templates"
        )
    return pad_contexts([pools.of(w) for w in kept]), kept, lost


def run_ceat_suite(
    pools: ContextPools,
    tests: Sequence[data.WeatTest],
    positions: Sequence[int],
    *,
    key: jax.Array,
    n_draws: int = 10_000,
    chunk: int = 1000,
    max_oov_share: float = 0.2,
    alternative: str = DEFAULT_ALTERNATIVE,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """CEAT per test: one aggregate row per test and the per-draw table (``test``, ``draw``,
    ``effect_size``, ``variance``). Test i draws with ``fold_in(key, positions[i])``."""
    rows, draws = [], []
    for test, position in zip(tests, positions):
        sets = (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)
        names = (test.x_name, test.y_name, test.a_name, test.b_name)
        check_distinct_words(f"test {test.id}", sets, names)
        built = [_set_of(pools, words, f"{test.id} {name}", max_oov_share) for words, name in zip(sets, names)]
        res = ceat(
            jax.random.fold_in(key, position),
            *(b[0] for b in built),
            n_draws=n_draws,
            chunk=chunk,
            alternative=alternative,
        )
        es, var = np.asarray(res.effect_sizes), np.asarray(res.variances)
        counts = np.concatenate([np.asarray(b[0].counts) for b in built])
        rows.append(
            {
                "test": test.id,
                "name": test.name,
                **{f"n_{s}": len(b[1]) for s, b in zip("xyab", built)},
                "lost_words": " ".join(w for b in built for w in b[2]),
                "effect_size": float(res.combined.ces),
                "ces": float(res.combined.ces),
                "ces_variance": float(res.combined.variance),
                "ces_se": float(np.sqrt(res.combined.variance)),
                "tau_squared": float(res.combined.tau_squared),
                "p_value": float(res.combined.p_value),
                "alternative": alternative,
                "undefined_reason": "" if np.isfinite(float(res.combined.ces)) else UNDEFINED_DRAWS,
                "n_draws": n_draws,
                "draw_es_mean": float(es.mean()),
                "draw_es_sd": float(es.std(ddof=1)),
                **{f"draw_es_q{q * 100:g}": float(v) for q, v in zip(DRAW_QUANTILES, np.quantile(es, DRAW_QUANTILES))},
                "draw_variance_mean": float(var.mean()),
                "draw_share_positive": float((es > 0).mean()),
                "contexts_per_word_min": int(counts.min()),
                "contexts_per_word_mean": float(counts.mean()),
                **small_test_columns(
                    f"test {test.id}", dict(zip("XYAB", (len(b[1]) for b in built))), None, None, ci=False
                ),
            }
        )
        draws.append(pd.DataFrame({"test": test.id, "draw": np.arange(n_draws), "effect_size": es, "variance": var}))
    return pd.DataFrame(rows), pd.concat(draws, ignore_index=True)


def word_table(pools: ContextPools, tests: Sequence[data.WeatTest]) -> pd.DataFrame:
    """One row per (test, set, word): how many contexts it got and how (corpus or fallback)."""
    rows = []
    for test in tests:
        for role, words in zip("XYAB", (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)):
            for w in words:
                i = pools.words.index(w)
                rows.append(
                    {"test": test.id, "set": role, "word": w, "n_contexts": int(pools.counts[i]), "how": pools.how[i]}
                )
    return pd.DataFrame(rows)
