"""CEAT's per-word context pools of a language model's contextual embeddings (Guo & Caliskan 2021; Cao et al.
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

The tests on the pools (CES, its variance, τ² and p per test): :mod:`jaxassoc.suites.ceat`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
from jaxtyping import Float

from jaxassoc import data
from jaxassoc.embeddings.contextual import BLEACHED_TEMPLATES, ContextIndex
from jaxassoc.embeddings.sentence import token_states
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models.base import LanguageModel

FALLBACKS = ("word", "templates", "drop")


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
