"""Sentence vectors: a layer's token states pooled over each sentence's tokens (special tokens included).
``pooling="mean"`` is the mean over the attention mask (Reimers & Gurevych 2019, the pooling of
sentence-transformers models such as all-MiniLM-L6-v2; ZCA-WEAT paper, STS-B); ``"first"`` is the first
token (BERT's [CLS]); ``"last"`` the last one (a causal LM's only position that has read the whole
sentence). SEAT (docs/methods.md §8) picks one per model kind.

``layer`` indexes the model's ``hidden_states`` (0 = embedding output, -1 = last block). The last block
is not ``ForwardOutput.hidden`` for masked LMs, whose head input is after the MLM transform.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import model_limits, run_batched


def mean_pool(hidden: Float[Array, "B T D"], mask: Int[Array, "B T"]) -> Float[Array, "B D"]:
    """Mean over the positions where ``mask`` is 1."""
    weights = mask.astype(hidden.dtype)[..., None]
    return (hidden * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1.0)


POOLINGS = ("mean", "first", "last")


def pool_states(states: Float[np.ndarray, "T D"], pooling: str) -> Float[np.ndarray, " D"]:
    """One sentence's vector from its token states (unpadded, special tokens included): their mean, the
    first or the last one."""
    if pooling == "mean":
        return states.mean(axis=0)
    if pooling == "first":
        return states[0]
    if pooling == "last":
        return states[-1]
    raise ConfigError(f"pooling {pooling!r}: use one of {list(POOLINGS)}")


def check_layer(model: LanguageModel, layer: int) -> None:
    """InputError unless ``layer`` indexes the model's hidden states (embeddings + one per block)."""
    one = jnp.ones((1, 1), jnp.int32)
    n_layers = len(jax.eval_shape(lambda b: model.forward(b, one, one, all_layers=True), model.params["body"]).layers)
    if not -n_layers <= layer < n_layers:
        raise InputError(f"layer {layer} does not exist: {model.name} has hidden states 0..{n_layers - 1}")


@functools.partial(jax.jit, static_argnames=("forward", "layer"))
def _layer_states(params, ids, mask, *, forward, layer: int):
    return forward(params["body"], ids, mask, all_layers=True).layers[layer]


def token_states(
    model: LanguageModel,
    texts: Sequence[str],
    *,
    layer: int = -1,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: bool = False,
) -> tuple[list[Float[np.ndarray, "T D"]], list[list[tuple[int, int]]]]:
    """``layer``'s states of every token of each text (special tokens included), and the tokenizer's
    character offsets; batched by :func:`jaxassoc.models.batching.run_batched` (length-sorted buckets;
    ``progress``: a bar over the batches)."""
    if not texts:
        raise InputError("no texts given")
    check_layer(model, layer)
    limits = model_limits(model)
    enc = model.tokenizer(
        list(texts), truncation=True, max_length=max_length or limits["max_length"], return_offsets_mapping=True
    )
    states = run_batched(
        functools.partial(_layer_states, forward=model.forward, layer=layer),
        model.params,
        [list(ids) for ids in enc["input_ids"]],
        batch_size=batch_size,
        progress=progress,
        mesh=model.mesh,
        **limits,
    )
    return states, [list(map(tuple, o)) for o in enc["offset_mapping"]]


def sentence_vectors(
    model: LanguageModel,
    sentences: Sequence[str],
    *,
    layer: int = -1,
    batch_size: int = 64,
    max_length: int | None = None,
    progress: bool = False,
    pooling: str = "mean",
) -> Float[np.ndarray, "n D"]:
    """Pooled ``layer`` states of each sentence (:func:`pool_states`; the default mean includes the special
    tokens, as sentence-transformers does), in input order."""
    if not sentences:
        raise InputError("sentence_vectors: no sentences given")
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling {pooling!r}: use one of {list(POOLINGS)}")
    states, _ = token_states(
        model, sentences, layer=layer, batch_size=batch_size, max_length=max_length, progress=progress
    )
    return np.stack([pool_states(s, pooling) for s in states]).astype(np.float32)
