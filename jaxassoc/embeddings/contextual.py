"""Word vectors from a contextual model, Bommasani, Davis & Cardie (2020) "aggregated" (ZCA-WEAT §4.1).

For each word: up to ``max_contexts`` (20) corpus sentences of 7-75 whitespace tokens that contain it as
a whole token (case-sensitive), drawn with a fixed seed; in each sentence the word's subword tokens are
mean-pooled in ``layer`` (default the last block); the sentence vectors are averaged.

Words without any context fall back to a configurable choice, recorded per word:
``"word"`` (the word alone, its subwords mean-pooled, special tokens excluded), ``"templates"``
(bleached templates as in May et al. 2019, e.g. "This is {word}."), or ``"drop"`` (reported as OOV).

ZCA reference for contextual models (:func:`contextual_reference`): up to 100,000 corpus sentences fed
whole (the paper avoids isolated words, which are out of distribution); the statistics are fitted on
their token states (``level="token"``, default: the word vectors are means of token states) or on
their mean-pooled sentence vectors (``level="sentence"``); the description records which.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from jaxassoc.embeddings.sentence import token_states
from jaxassoc.embeddings.static import Lookup
from jaxassoc.embeddings.whitening import ReferenceSample
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models.base import LanguageModel

BLEACHED_TEMPLATES = ("This is {}.", "That is {}.", "There is {}.", "Here is {}.", "It is {}.")
Fallback = Literal["word", "templates", "drop"]


def tokenizer_normaliser(tokenizer: Any) -> Callable[[str], str]:
    """What a tokenizer makes of a word before splitting it: an uncased BERT lower-cases and strips accents,
    so ``Rose`` and ``rose`` are one word to the model (the word rule's ``key``); the identity when it does
    not normalise."""
    normalizer = getattr(getattr(tokenizer, "backend_tokenizer", None), "normalizer", None)
    return (lambda word: word) if normalizer is None else normalizer.normalize_str


@dataclasses.dataclass(frozen=True)
class ContextIndex:
    """Sentences of the reference corpus within the length bounds, indexed by their tokens."""

    sentences: tuple[str, ...]
    by_token: dict[str, list[int]]

    @classmethod
    def build(cls, sentences: Sequence[str], *, min_tokens: int = 7, max_tokens: int = 75) -> "ContextIndex":
        kept = tuple(s for s in sentences if min_tokens <= len(s.split()) <= max_tokens)
        by_token: dict[str, list[int]] = defaultdict(list)
        for i, sentence in enumerate(kept):
            for token in set(sentence.split()):
                by_token[token].append(i)
        return cls(kept, dict(by_token))

    def contexts(self, word: str, *, max_contexts: int, seed: int) -> list[str]:
        """Up to ``max_contexts`` sentences containing ``word``; the draw depends on the seed and word only."""
        rows = self.by_token.get(word, [])
        if len(rows) > max_contexts:
            rng = np.random.default_rng([seed, *word.encode()])
            rows = sorted(rng.choice(rows, size=max_contexts, replace=False))
        return [self.sentences[i] for i in rows]


def _word_spans(text: str, word: str) -> list[tuple[int, int]]:
    """Character spans of ``word`` as a whole whitespace token of ``text``."""
    spans, pos = [], 0
    for token in text.split(" "):
        if token == word:
            spans.append((pos, pos + len(token)))
        pos += len(token) + 1
    return spans


def _pooled_word_vectors(
    model: LanguageModel, texts: list[str], spans: list[tuple[int, int]], layer: int, batch_size: int
) -> np.ndarray:
    """For each text, the mean of ``layer`` over the subword tokens overlapping its character span."""
    states, offsets = token_states(model, texts, layer=layer, batch_size=batch_size)
    out = []
    for text, state, offset, (lo, hi) in zip(texts, states, offsets, spans):
        tokens = [t for t, (a, b) in enumerate(offset) if b > a and a < hi and b > lo]
        if not tokens:
            raise InputError(f"no token of {text!r} covers characters {lo}..{hi}")
        out.append(state[tokens].mean(axis=0))
    return np.stack(out)


@dataclasses.dataclass(frozen=True, eq=False)
class ContextualWordVectors:
    """A ``vectors_fn`` for the pipelines: ``lookup(words, name=...)`` -> Lookup, with per-word provenance."""

    model: LanguageModel
    index: ContextIndex
    layer: int = -1
    max_contexts: int = 20
    seed: int = 0
    fallback: Fallback = "word"
    batch_size: int = 32
    cache: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.fallback not in ("word", "templates", "drop"):
            raise ConfigError(f"contextual fallback {self.fallback!r}: use 'word', 'templates' or 'drop'")

    def normalise(self, word: str) -> str:
        """The word as the model's tokenizer reads it (:func:`tokenizer_normaliser`)."""
        return tokenizer_normaliser(self.model.tokenizer)(word)

    def _plan(self, word: str) -> tuple[list[str], list[tuple[int, int]], str]:
        """The contexts of ``word``, its character span in each, and how they were chosen."""
        contexts = self.index.contexts(word, max_contexts=self.max_contexts, seed=self.seed)
        if contexts:
            return contexts, [_word_spans(c, word)[0] for c in contexts], f"{len(contexts)} contexts"
        if self.fallback == "drop":
            return [], [], "no context: dropped"
        contexts = [word] if self.fallback == "word" else [t.format(word) for t in BLEACHED_TEMPLATES]
        return (
            contexts,
            [(c.index(word), c.index(word) + len(word)) for c in contexts],
            f"no context: fallback {self.fallback}",
        )

    def prefetch(self, words: Sequence[str]) -> None:
        """Compute the vectors of every new word in one batched run over all their contexts."""
        plans = {w: self._plan(w) for w in dict.fromkeys(words) if w not in self.cache}
        texts = [c for contexts, _, _ in plans.values() for c in contexts]
        spans = [sp for _, word_spans, _ in plans.values() for sp in word_spans]
        pooled = _pooled_word_vectors(self.model, texts, spans, self.layer, self.batch_size) if texts else None
        start = 0
        for word, (contexts, _, how) in plans.items():
            vector = pooled[start : start + len(contexts)].mean(axis=0) if contexts else None
            self.cache[word] = (vector, how)
            start += len(contexts)

    def vector(self, word: str) -> tuple[np.ndarray | None, str]:
        """The aggregated vector of ``word`` and how it was made (``"20 contexts"``, ``"fallback: word"``)."""
        self.prefetch([word])
        return self.cache[word]

    def __call__(self, words: Sequence[str], name: str = "word set") -> Lookup:
        if not words:
            raise InputError(f"{name!r} is empty: give it at least one word")
        self.prefetch(words)
        found = [(w, *self.cache[w]) for w in words]
        kept = [w for w, v, _ in found if v is not None]
        if not kept:
            raise InputError(f"{name!r}: no word has a context in the reference corpus: {list(words)}")
        vectors = np.stack([v for _, v, _ in found if v is not None]).astype(np.float32)
        return Lookup(vectors, kept, [w for w, v, _ in found if v is None])

    def coverage(self) -> dict[str, str]:
        """How each word looked up so far got its vector."""
        return {w: how for w, (_, how) in self.cache.items()}


def contextual_reference(
    model: LanguageModel,
    sentences: Sequence[str],
    *,
    level: Literal["token", "sentence"] = "token",
    layer: int = -1,
    max_items: int = 100_000,
    seed: int = 0,
    batch_size: int = 32,
    progress: bool = False,
) -> ReferenceSample:
    """Vectors to fit ZCA on for a contextual model: up to ``max_items`` sentences (seeded draw), then
    either all their non-special token states (themselves capped at ``max_items``, seeded) or their
    mean-pooled sentence vectors. ``progress``: a bar over the batches."""
    if level not in ("token", "sentence"):
        raise ConfigError(f"contextual reference level {level!r}: use 'token' or 'sentence'")
    rng = np.random.default_rng(seed)
    chosen = list(sentences)
    if len(chosen) > max_items:
        chosen = [chosen[i] for i in sorted(rng.choice(len(chosen), size=max_items, replace=False))]
    if not chosen:
        raise InputError("contextual_reference: no sentences given")
    states, offsets = token_states(model, chosen, layer=layer, batch_size=batch_size, progress=progress)
    vectors, labels = [], []
    for text, state, offset in zip(chosen, states, offsets):
        if level == "sentence":
            vectors.append(state.mean(axis=0))
            labels.append(text)
        else:
            tokens = [t for t, (a, b) in enumerate(offset) if b > a]
            vectors.extend(state[tokens])
            labels.extend(text[offset[t][0] : offset[t][1]] for t in tokens)
    vectors = np.stack(vectors).astype(np.float32)
    if len(vectors) > max_items:
        keep = np.sort(rng.choice(len(vectors), size=max_items, replace=False))
        vectors, labels = vectors[keep], [labels[i] for i in keep]
    description = (
        f"{model.name} layer {layer}, {level}-level states of {len(chosen)} reference sentences; "
        f"{len(vectors)} items, seed {seed}"
    )
    return ReferenceSample(vectors, labels, description)
