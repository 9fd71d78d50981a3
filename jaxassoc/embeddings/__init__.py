"""Vectors to measure: static word embeddings, ZCA whitening, sentence and contextual word vectors.

Field guide (module: what is there; paper):

- :mod:`~jaxassoc.embeddings.static` — word -> vector tables with an explicit OOV policy:
  ``StaticEmbeddings`` (``lookup(words, name=...)`` -> ``Lookup``), ``load_embedded_glove`` (GloVe 6B-50d,
  Pennington et al. 2014, shipped offline), ``load_glove_text``, ``load_word2vec_binary``.
- :mod:`~jaxassoc.embeddings.whitening` — ZCA whitening (ZCA-WEAT paper, §3.2, Eq. 7-8, 11):
  ``fit_zca`` (μ, W = U (Λ + εI)^{-1/2} Uᵀ, ε = 1e-3) -> ``ZcaStats``, ``apply_zca`` (differentiable
  z = W (x − μ)), ``save_zca`` / ``load_zca``, and the reference samples ``reference_sample`` /
  ``corpus_word_types`` (``ReferenceSample``: corpus word types by default, as docs/methods.md §2 pins).
- :mod:`~jaxassoc.embeddings.sentence` — sentence vectors by masked mean pooling of a layer (Reimers &
  Gurevych 2019): ``mean_pool``, ``pool_states`` (mean, first or last token), ``sentence_vectors``, ``token_states``, ``check_layer`` (a layer index the model has).
- :mod:`~jaxassoc.embeddings.contextual` — word vectors from a contextual model, "aggregated" over up to
  20 corpus sentences (Bommasani, Davis & Cardie 2020): ``ContextIndex``, ``ContextualWordVectors``,
  ``contextual_reference`` (token- or sentence-level ZCA reference), ``tokenizer_normaliser`` (a word as the
  tokenizer reads it: the word rule's key), ``BLEACHED_TEMPLATES`` (May et al.
  2019) for words without contexts.

The vectors feed :mod:`jaxassoc.metrics` (e.g. ``weat_effect_size``, ``compare_whitening``); this layer
may use :mod:`jaxassoc.models` but never the metrics.
"""

from jaxassoc.embeddings.contextual import (
    BLEACHED_TEMPLATES,
    ContextIndex,
    ContextualWordVectors,
    contextual_reference,
    tokenizer_normaliser,
)
from jaxassoc.embeddings.sentence import check_layer, mean_pool, pool_states, sentence_vectors, token_states
from jaxassoc.embeddings.static import (
    Lookup,
    StaticEmbeddings,
    load_embedded_glove,
    load_glove_text,
    load_word2vec_binary,
)
from jaxassoc.embeddings.whitening import (
    ReferenceSample,
    ZcaStats,
    apply_zca,
    corpus_word_types,
    fit_zca,
    load_zca,
    reference_sample,
    save_zca,
)

__all__ = [
    "BLEACHED_TEMPLATES",
    "ContextIndex",
    "ContextualWordVectors",
    "Lookup",
    "ReferenceSample",
    "StaticEmbeddings",
    "ZcaStats",
    "apply_zca",
    "check_layer",
    "contextual_reference",
    "tokenizer_normaliser",
    "corpus_word_types",
    "fit_zca",
    "load_embedded_glove",
    "load_glove_text",
    "load_word2vec_binary",
    "load_zca",
    "mean_pool",
    "token_states",
    "reference_sample",
    "save_zca",
    "pool_states",
    "sentence_vectors",
]
