"""Sentence vectors: mean of a layer's token states over the attention mask (Reimers & Gurevych 2019,
the pooling of sentence-transformers models such as all-MiniLM-L6-v2; ZCA-WEAT paper, STS-B).

``layer`` indexes the model's ``hidden_states`` (0 = embedding output, -1 = last block). The last block
is not ``ForwardOutput.hidden`` for masked LMs, whose head input is after the MLM transform.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel


def mean_pool(hidden: Float[Array, "B T D"], mask: Int[Array, "B T"]) -> Float[Array, "B D"]:
    """Mean over the positions where ``mask`` is 1."""
    weights = mask.astype(hidden.dtype)[..., None]
    return (hidden * weights).sum(axis=1) / jnp.maximum(weights.sum(axis=1), 1.0)


def padded_length(n: int, multiple: int = 16) -> int:
    """Round a batch's length up to a multiple of 16 so that few distinct shapes are compiled."""
    return -(-n // multiple) * multiple


def layer_states(model: LanguageModel, ids: np.ndarray, mask: np.ndarray, layer: int) -> Float[Array, "B T D"]:
    """The hidden states of ``layer`` (HF ``hidden_states`` indexing) for a padded batch."""
    out = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask), all_layers=True)
    n_layers = len(out.layers)
    if not -n_layers <= layer < n_layers:
        raise InputError(f"layer {layer} does not exist: {model.name} has hidden states 0..{n_layers - 1}")
    return out.layers[layer]


def encode_batch(
    model: LanguageModel, texts: Sequence[str], *, max_length: int | None = None, rows: int | None = None
):
    """Token ids and mask padded to a multiple of 16 (and to ``rows`` rows with empty ones, so
    that a short last batch reuses the compiled shape), plus the tokenizer's character offsets."""
    max_length = max_length or model.max_positions
    enc = model.tokenizer(
        list(texts), truncation=True, max_length=max_length, return_offsets_mapping=True
    )
    length = min(padded_length(max(map(len, enc["input_ids"]))), max_length)
    pad = model.vocab.pad_id if model.vocab.pad_id is not None else 0
    n_rows = max(rows or 0, len(texts))
    ids = np.full((n_rows, length), pad, dtype=np.int32)
    mask = np.zeros((n_rows, length), dtype=np.int32)
    for i, row in enumerate(enc["input_ids"]):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask, enc["offset_mapping"]


def sentence_vectors(
    model: LanguageModel,
    sentences: Sequence[str],
    *,
    layer: int = -1,
    batch_size: int = 64,
    max_length: int | None = None,
) -> Float[np.ndarray, "n D"]:
    """Mean-pooled ``layer`` states of each sentence (special tokens included, as sentence-transformers
    does), in input order; batches are sorted by length to limit padding."""
    if not sentences:
        raise InputError("sentence_vectors: no sentences given")
    order = np.argsort([len(s) for s in sentences], kind="stable")
    chunks = []
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        ids, mask, _ = encode_batch(
            model, [sentences[i] for i in idx], max_length=max_length, rows=batch_size
        )
        pooled = mean_pool(layer_states(model, ids, mask, layer), jnp.asarray(mask))
        chunks.append(np.asarray(pooled)[: len(idx)])
    pooled = np.concatenate(chunks)
    out = np.empty_like(pooled)
    out[order] = pooled
    return out
