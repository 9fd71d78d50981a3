"""A language model's word, sentence and reference vectors through the on-disk cache
(:mod:`jaxassoc.array_cache`), the inputs of WEAT, SEAT and WEFE on contextual models and of their ZCA fit, so a
sweep over whitening or statistics options extracts the vectors once.

- :func:`prefetch_word_vectors`: a :class:`~jaxassoc.embeddings.contextual.ContextualWordVectors`' words
  (Bommasani et al. 2020), extracted in cached chunks;
- :func:`cached_sentence_vectors`: :func:`~jaxassoc.embeddings.sentence.sentence_vectors`, cached;
- :func:`cached_reference`: the contextual ZCA reference sample
  (:func:`~jaxassoc.embeddings.contextual.contextual_reference`), cached;
- :func:`suite_words`: every word of a WEAT suite, the words to extract.

The tests themselves run on these vectors in :mod:`jaxassoc.suites.weat`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.embeddings.contextual import ContextualWordVectors, contextual_reference
from jaxassoc.embeddings.sentence import sentence_vectors
from jaxassoc.embeddings.whitening import ReferenceSample
from jaxassoc.progress import progress


def suite_words(suite) -> list[str]:
    """Every target and attribute word of a WEAT suite, once each, in order of appearance."""
    sets = ((t.targets_x, t.targets_y, t.attributes_a, t.attributes_b) for t in suite.tests)
    return list(dict.fromkeys(w for test_sets in sets for words in test_sets for w in words))


def text_sha256(texts: Sequence[str]) -> str:
    """sha256 of the texts joined by newlines: a cache key part for a corpus."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def prefetch_word_vectors(
    vectors: ContextualWordVectors,
    words: Sequence[str],
    *,
    cache_dir: Path | None,
    quiet: bool = True,
    chunk_words: int = 128,
) -> int:
    """Fill ``vectors.cache`` with every new word's aggregated vector (Bommasani et al. 2020), in chunks of
    ``chunk_words`` (a progress bar unless ``quiet``), each chunk through the on-disk cache.

    The key holds the model (weights, tokenizer, dtypes), the corpus (hash of the indexed sentences), the
    layer, ``max_contexts``, seed, fallback, batch size and the chunk's words. Returns how many words
    were new. (MiniLM, the 359 words of weat_caliskan2017: chunks of 64 took 109 s, one run 91 s, one
    run per word set 117 s on a shared 2-core CPU; 128 keeps a few bar steps at near one-run speed.)"""
    new = [w for w in dict.fromkeys(words) if w not in vectors.cache]
    base = {
        **model_key(vectors.model),
        "corpus": text_sha256(vectors.index.sentences),
        "layer": vectors.layer,
        "max_contexts": vectors.max_contexts,
        "seed": vectors.seed,
        "fallback": vectors.fallback,
        "batch_size": vectors.batch_size,
    }
    chunks = [new[i : i + chunk_words] for i in range(0, len(new), chunk_words)]
    for chunk in progress(chunks, "word vectors", quiet=quiet, unit="chunk"):
        arrays = cached_arrays(
            cache_dir, "contextual_word_vectors", {**base, "words": chunk}, lambda chunk=chunk: _extract(vectors, chunk)
        )
        for word, has, vector, how in zip(chunk, arrays["has_vector"], arrays["vectors"], arrays["how"]):
            vectors.cache[word] = (vector if has else None, str(how))
    return len(new)


def _extract(vectors: ContextualWordVectors, words: list[str]) -> dict[str, np.ndarray]:
    vectors.prefetch(words)
    found = [vectors.cache[w] for w in words]
    dim = next((v.shape[0] for v, _ in found if v is not None), 0)
    dtype = next((v.dtype for v, _ in found if v is not None), np.float32)
    return {
        "has_vector": np.array([v is not None for v, _ in found]),
        "vectors": np.stack([v if v is not None else np.zeros(dim, dtype) for v, _ in found]),
        "how": np.array([how for _, how in found]),
    }


def cached_sentence_vectors(
    model,
    sentences: Sequence[str],
    *,
    cache_dir: Path | None,
    layer: int = -1,
    pooling: str = "mean",
    batch_size: int = 64,
    progress: bool = False,
) -> np.ndarray:
    """:func:`~jaxassoc.embeddings.sentence.sentence_vectors` through the on-disk cache (key: model,
    sentences' hash, layer, pooling and batch size)."""
    parts = {
        **model_key(model),
        "sentences": text_sha256(sentences),
        "layer": layer,
        "pooling": pooling,
        "batch_size": batch_size,
    }
    return cached_arrays(
        cache_dir,
        "sentence_vectors",
        parts,
        lambda: {
            "vectors": sentence_vectors(
                model, sentences, layer=layer, pooling=pooling, batch_size=batch_size, progress=progress
            )
        },
    )["vectors"]


def cached_reference(
    model,
    sentences: Sequence[str],
    *,
    cache_dir: Path | None,
    level: str = "token",
    layer: int = -1,
    max_items: int = 100_000,
    seed: int = 0,
    batch_size: int = 32,
    progress: bool = False,
) -> ReferenceSample:
    """:func:`~jaxassoc.embeddings.contextual.contextual_reference` through the on-disk cache (key: model,
    sentences' hash and every argument but ``progress``)."""
    parts = {
        **model_key(model),
        "sentences": text_sha256(sentences),
        "level": level,
        "layer": layer,
        "max_items": max_items,
        "seed": seed,
        "batch_size": batch_size,
    }

    def compute() -> dict[str, np.ndarray]:
        ref = contextual_reference(
            model,
            sentences,
            level=level,
            layer=layer,
            max_items=max_items,
            seed=seed,
            batch_size=batch_size,
            progress=progress,
        )
        return {"vectors": ref.vectors, "words": np.array(ref.words), "description": np.array(ref.description)}

    arrays = cached_arrays(cache_dir, "contextual_reference", parts, compute)
    return ReferenceSample(arrays["vectors"], [str(x) for x in arrays["words"]], str(arrays["description"]))
