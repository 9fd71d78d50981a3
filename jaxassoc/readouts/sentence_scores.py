"""Sentence scores from a language model, shared by the metrics that compare sentences (UnStereoEval,
CrowS-Pairs, StereoSet; docs/methods.md §4.3, §6.2).

- Causal LM: log P(sentence | start token) = the sum of log p(token | start token and the earlier tokens),
  packed end to end into rows of fixed length (:func:`jaxassoc.models.packing.run_packed`): positions
  restart and attention stays within each sentence, so a sentence's score does not depend on its
  neighbours.
- Masked LM: the pseudo-log-likelihood of chosen positions (Salazar et al. 2020; Nangia et al. 2020
  §3): one copy of the sentence per position with that token masked, log p(the hidden token | the
  copy) at the mask, every copy of every sentence batched together.

Per-token log-probabilities come back as float32 and are summed on the host in float64. The jitted
functions (:func:`causal_token_logprobs`, :func:`masked_token_logprobs`) are pure functions of the
parameters: differentiate them for a training signal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxassoc.errors import InputError, ModelError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import FINE_BUCKETS, model_limits, run_batched
from jaxassoc.models.heads import gather_positions, head_logits, next_token_logprobs
from jaxassoc.models.packing import run_packed


def start_token(model: LanguageModel, *, eos_fallback: bool, what: str) -> int:
    """The id a causal sentence score conditions on: the model's BOS token, or its EOS token when it has
    no BOS and ``eos_fallback``; ModelError naming ``what`` needs it otherwise."""
    if model.objective != "causal":
        raise ModelError(f"{what} scores sentences with a causal LM; {model.name!r} is {model.objective}")
    start = model.vocab.bos_id if model.vocab.bos_id is not None else (model.vocab.eos_id if eos_fallback else None)
    if start is None:
        raise ModelError(f"{model.name!r} has no BOS token: {what} scores every token after a BOS")
    return int(start)


def causal_token_ids(
    model: LanguageModel, sentences: Sequence[str], start_id: int, where: Callable[[int], str] | None = None
) -> list[list[int]]:
    """Token ids of each sentence after ``start_id`` (added once, whatever the tokenizer's default).
    InputError for a sentence without tokens or longer than the context, named by ``where(i)`` (e.g. the
    user's file, line and pair; default ``sentence i``)."""
    encoded = model.tokenizer(list(sentences), add_special_tokens=False)["input_ids"]
    for i, ids in enumerate(encoded):
        name = f"sentence {i}" if where is None else where(i)
        if not ids:
            raise InputError(f"{name} ({sentences[i]!r}) has no tokens: every sentence needs text")
        if len(ids) + 1 > model.max_positions:
            raise InputError(
                f"{name} ({sentences[i][:60]!r}...) has {len(ids)} tokens + the start token, more than "
                f"the {model.max_positions}-token context of {model.name!r}: shorten or drop it"
            )
    return [[start_id, *ids] for ids in encoded]


@functools.partial(jax.jit, static_argnames=("forward",))
def causal_token_logprobs(
    params, ids: Int[Array, "B T"], segments: Int[Array, "B T"], *, forward
) -> Float[Array, "B T"]:
    """Column t: log p(token t+1 | its sentence up to t), 0 at a sentence's last token and on padding;
    ``forward`` (static) keeps one compilation per model."""
    logp = next_token_logprobs(params["head"], forward(params["body"], ids, segments).hidden, ids, segments)
    return jnp.pad(logp, ((0, 0), (0, 1)))


def causal_token_rows(
    model: LanguageModel, sequences: list[list[int]], *, tokens_per_batch: int = 1024, progress: bool = False
) -> list[np.ndarray]:
    """Per sequence, float32 log p(token t+1 | tokens up to t) at column t (0 in its last column); the model's
    scoring transform's (``model.with_scoring``: Self-Debias) where it has one."""
    if model.scoring is not None:
        return model.scoring.causal_token_rows(model.with_scoring(None), sequences, progress=progress)
    return run_packed(
        functools.partial(causal_token_logprobs, forward=model.forward),
        model.params,
        sequences,
        tokens_per_batch=tokens_per_batch,
        progress=progress,
        mesh=model.mesh,
        **model_limits(model),
    )


def causal_log_likelihoods(
    model: LanguageModel, sequences: list[list[int]], *, tokens_per_batch: int = 1024, progress: bool = False
) -> np.ndarray:
    """float64 sum of log p(token | earlier tokens) over each sequence's tokens after its first."""
    rows = causal_token_rows(model, sequences, tokens_per_batch=tokens_per_batch, progress=progress)
    return np.array([row.astype(np.float64).sum() for row in rows])


@functools.partial(jax.jit, static_argnames=("forward", "mask_id"))
def masked_token_logprobs(
    params, ids: Int[Array, "B T"], mask: Int[Array, "B T"], hidden_ids: Int[Array, "B T"], *, forward, mask_id: int
) -> Float[Array, " B"]:
    """log p(hidden_ids at the mask | ids) for rows holding one mask each (float32); ``hidden_ids`` are the
    unmasked sequences."""
    position = jnp.argmax(ids == mask_id, axis=1)
    x = gather_positions(forward(params["body"], ids, mask).hidden, position)
    logits = head_logits(params["head"], x).astype(jnp.float32)
    target = jnp.take_along_axis(hidden_ids, position[:, None], axis=1)
    return jnp.take_along_axis(logits, target, axis=1)[:, 0] - jax.nn.logsumexp(logits, axis=1)


def check_masked_lm(model: LanguageModel, what: str) -> int:
    """The mask id of a masked LM with its MLM head; ModelError naming ``what`` needs it otherwise."""
    if model.objective != "masked" or model.head is None or model.vocab.mask_id is None:
        raise ModelError(
            f"{what} needs a masked LM with its MLM head and a mask token; {model.name!r} is {model.objective}"
            f"{'' if model.head is not None else ' without an MLM head'}"
        )
    return int(model.vocab.mask_id)


def masked_logprobs(
    model: LanguageModel,
    masked: list[list[int]],
    filled: list[list[int]],
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> np.ndarray:
    """float32 log p(the token of ``filled`` at the mask | ``masked``), one per sequence; each ``masked``
    sequence holds one mask and equals its ``filled`` sequence elsewhere; the model's scoring transform's
    (``model.with_scoring``: Self-Debias) where it has one."""
    if model.scoring is not None:
        return model.scoring.masked_logprobs(model.with_scoring(None), masked, filled, progress=progress)
    fn = functools.partial(
        masked_token_logprobs, forward=model.forward, mask_id=check_masked_lm(model, "masked_logprobs")
    )
    out = run_batched(
        fn,
        model.params,
        masked,
        aligned=filled,
        batch_size=batch_size,
        buckets=FINE_BUCKETS,
        per_token=False,
        progress=progress,
        mesh=model.mesh,
        **model_limits(model),
    )
    return np.array([float(o) for o in out], np.float32)


def pseudo_log_likelihoods(
    model: LanguageModel,
    sequences: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    *,
    batch_size: int = 64,
    progress: bool = False,
) -> list[np.ndarray]:
    """For each sequence (with its special tokens) the float32 log p of its token at each of ``positions``
    when that one token is masked; identical masked copies are run once."""
    mask_id = check_masked_lm(model, "a pseudo-log-likelihood")
    masked, originals, slots = masked_copies(sequences, positions, mask_id)
    logp = masked_logprobs(model, masked, originals, batch_size=batch_size, progress=progress)
    return [logp[row] for row in slots]


def masked_copies(
    sequences: Sequence[Sequence[int]], positions: Sequence[Sequence[int]], mask_id: int
) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    """``(masked, originals, slots)``: one copy of a sequence per position with that token masked, identical
    copies once, and for each sequence the indices of its positions' copies."""
    copies: dict[tuple[tuple[int, ...], int], int] = {}  # (sentence, position): two sentences that differ only
    masked, originals, slots = [], [], []  # at the masked position give the same copy but other targets
    for seq, where in zip(sequences, positions):
        row = []
        for p in where:
            key = (tuple(seq), p)
            if key not in copies:
                copies[key] = len(masked)
                masked.append([*seq[:p], mask_id, *seq[p + 1 :]])
                originals.append(list(seq))
            row.append(copies[key])
        slots.append(row)
    return masked, originals, slots


def padded(sequences: Sequence[Sequence[int]], pad: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, mask)`` int32 of ``sequences`` right-padded with ``pad`` to the longest."""
    T = max(len(s) for s in sequences)
    ids, mask = np.full((len(sequences), T), pad, np.int32), np.zeros((len(sequences), T), np.int32)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
    return ids, mask


def sentence_log_likelihoods(
    hidden: Callable[[Array, Array], Array], head, ids: Int[Array, "B T"], mask: Int[Array, "B T"]
) -> Float[Array, " B"]:
    """Per row: the sum of log p(token t+1 | tokens <= t) over its real tokens after the first, from ``hidden(ids,
    mask)`` (a model's head inputs, e.g. of an adapted model's parameters) and ``head``: differentiable in both,
    float32 (the jnp form of :func:`causal_log_likelihoods`, for fine-tuning bias terms)."""
    logp = jax.nn.log_softmax(head_logits(head, hidden(ids, mask)).astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(logp[:, :-1], ids[:, 1:, None], axis=-1)[..., 0]
    return jnp.sum(picked * mask[:, 1:], axis=-1)


def pair_arrays(model: LanguageModel, first: Sequence[str], second: Sequence[str], start: int) -> dict[str, np.ndarray]:
    """Padded ids and masks of sentence pairs, each starting with ``start`` once (``first_ids``, ``first_mask``,
    ``second_ids``, ``second_mask``), as :func:`causal_token_ids` tokenises them."""
    out = {}
    for name, sentences in (("first", first), ("second", second)):
        ids, mask = padded(causal_token_ids(model, list(sentences), start))
        out[f"{name}_ids"], out[f"{name}_mask"] = ids, mask
    return out


def pair_log_likelihoods(hidden, head, arrays, **_):
    """``(log P(first), log P(second))`` of :func:`pair_arrays`' pairs (a fine-tuning bias term's parts)."""
    return (sentence_log_likelihoods(hidden, head, arrays["first_ids"], arrays["first_mask"]),
            sentence_log_likelihoods(hidden, head, arrays["second_ids"], arrays["second_mask"]))  # fmt: skip
