"""Language-model ports (GPT-2, BERT/RoBERTa, Llama) as pure JAX functions over parameter pytrees.

Start with :func:`load_model`; :func:`run_batched` runs a jitted function of ``(params, ids, mask)``
over many sequences with one compilation per length bucket.
"""

from jaxassoc.models.base import ForwardOutput, Head, LanguageModel, Provenance, VocabInfo
from jaxassoc.models.batching import cast_params, model_limits, run_batched
from jaxassoc.models.loading import load_model

__all__ = [
    "ForwardOutput",
    "Head",
    "LanguageModel",
    "Provenance",
    "VocabInfo",
    "cast_params",
    "load_model",
    "model_limits",
    "run_batched",
]
