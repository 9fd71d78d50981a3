"""CrowS-Pairs sentence scores (Nangia et al. 2020; docs/methods.md §6.2).

- Masked LM, the authors' rule: both sentences are tokenised with their special tokens; the tokens they
  share are the ``equal`` blocks of a ``difflib.SequenceMatcher`` over the two id sequences; each shared
  token but the first and the last (the special tokens around the text) is masked in turn, and a
  sentence's score is the sum over those positions of log p(its token | the copy with it masked)
  (:func:`~jaxassoc.readouts.sentence_scores.pseudo_log_likelihoods`; all copies of all sentences are
  batched, identical copies run once).
- Causal LM: log P(sentence | start token), the start token being the model's BOS token, or EOS when it
  has none (as lm-evaluation-harness scores a sentence with an empty context).

A pair whose sentences share no token (the shared block holds only the special tokens) is an
:class:`~jaxassoc.errors.InputError` naming the file, line and pair: it is not a minimal pair. So is, before
any forward pass, a pair whose two sentences the model's tokenizer reads as the same tokens (``He ran.`` /
``he ran.`` to an uncased tokenizer: neutral whatever the model) and a pair it reads as an earlier pair
(it would count twice): :func:`check_distinct_pairs`.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np
import pandas as pd

from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.sentence_scores import (
    causal_log_likelihoods,
    causal_token_ids,
    pair_arrays,
    pair_log_likelihoods,
    pseudo_log_likelihoods,
    start_token,
)

SENTENCES = ("sent_more", "sent_less")


def shared_positions(a: Sequence[int], b: Sequence[int]) -> tuple[list[int], list[int]]:
    """Positions in ``a`` and in ``b`` of the tokens the two sequences share (difflib's ``equal`` blocks)."""
    in_a, in_b = [], []
    for tag, a0, a1, b0, b1 in difflib.SequenceMatcher(None, list(a), list(b)).get_opcodes():
        if tag == "equal":
            in_a += range(a0, a1)
            in_b += range(b0, b1)
    return in_a, in_b


def _no_shared_tokens(row, source: str) -> InputError:
    return InputError(
        f"{source}, line {row.line} (pair {row.pair}): sent_more and sent_less share no tokens, so the pair is "
        f"not a minimal pair and CrowS-Pairs cannot compare it: {row.sent_more!r} / {row.sent_less!r}"
    )


def check_distinct_pairs(model: LanguageModel, pairs: pd.DataFrame, source: str) -> None:
    """InputError naming the file, line and pair when ``model``'s tokenizer reads a pair's two sentences as
    the same tokens, or a pair as an earlier one (both lines named; module docstring)."""
    ids = model.tokenizer(pairs[list(SENTENCES)].to_numpy().ravel().tolist(), add_special_tokens=False)["input_ids"]
    first: dict[tuple, tuple] = {}
    for row, more, less in zip(pairs.itertuples(), ids[0::2], ids[1::2]):
        where = f"{source}, line {row.line} (pair {row.pair})"
        if more == less:
            raise InputError(
                f"{where}: the tokenizer of {model.name!r} reads sent_more and sent_less as the same tokens "
                f"({row.sent_more!r} / {row.sent_less!r}; e.g. it lower-cases), so the pair would be neutral "
                f"whatever the model; make them differ in words"
            )
        earlier = first.setdefault((tuple(more), tuple(less)), row)
        if earlier is not row:
            raise InputError(
                f"{where}: the tokenizer of {model.name!r} reads the pair {row.sent_more!r} / {row.sent_less!r} "
                f"as the pair on line {earlier.line} (pair {earlier.pair}), {earlier.sent_more!r} / "
                f"{earlier.sent_less!r}; a repeated pair would count twice in the metric score, so list it once"
            )


def _check_length(model: LanguageModel, row, ids: Sequence[int], column: str, source: str) -> None:
    if len(ids) > model.max_positions:
        raise InputError(
            f"{source}, line {row.line} (pair {row.pair}): {column} has {len(ids)} tokens, more than the "
            f"{model.max_positions}-token context of {model.name!r}"
        )


def masked_inputs(model: LanguageModel, pairs: pd.DataFrame, source: str) -> tuple[list[list[int]], list[list[int]]]:
    """Per pair, the ``sent_more`` then the ``sent_less`` token ids (special tokens included) and the
    positions to mask in each (module docstring)."""
    sequences, positions = [], []
    for row in pairs.itertuples():
        ids = [model.tokenizer(getattr(row, c))["input_ids"] for c in SENTENCES]
        for column, seq in zip(SENTENCES, ids):
            _check_length(model, row, seq, column, source)
        shared = shared_positions(*ids)
        if len(shared[0]) <= 2:
            raise _no_shared_tokens(row, source)
        sequences += ids
        positions += [where[1:-1] for where in shared]
    return sequences, positions


def causal_inputs(model: LanguageModel, pairs: pd.DataFrame, source: str) -> list[list[int]]:
    """Per pair, the ``sent_more`` then the ``sent_less`` token ids after the start token."""
    start = start_token(model, eos_fallback=True, what="CrowS-Pairs")
    sequences = []
    for row in pairs.itertuples():
        where = lambda i, row=row: f"{source}, line {row.line} (pair {row.pair}): {SENTENCES[i]}"  # noqa: E731
        ids = causal_token_ids(model, [getattr(row, c) for c in SENTENCES], start, where)
        if not shared_positions(ids[0][1:], ids[1][1:])[0]:
            raise _no_shared_tokens(row, source)
        sequences += ids
    return sequences


def score_pairs(
    model: LanguageModel,
    pairs: pd.DataFrame,
    *,
    source: str = "CrowS-Pairs",
    batch_size: int = 64,
    tokens_per_batch: int = 1024,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """``sent_more_score``, ``sent_less_score`` (float64 log-likelihoods, pseudo for a masked LM) and
    ``sent_more_tokens``, ``sent_less_tokens`` (the tokens scored) of each pair of ``pairs`` (the rows of
    :func:`jaxassoc.data.crows_pairs.load_crows_pairs`); ``source`` names the file in errors."""
    check_distinct_pairs(model, pairs, source)
    if model.objective == "masked":
        sequences, positions = masked_inputs(model, pairs, source)
        per_token = pseudo_log_likelihoods(model, sequences, positions, batch_size=batch_size, progress=progress)
        scores = np.array([p.astype(np.float64).sum() for p in per_token])
        counts = np.array([len(p) for p in positions])
    else:
        sequences = causal_inputs(model, pairs, source)
        scores = causal_log_likelihoods(model, sequences, tokens_per_batch=tokens_per_batch, progress=progress)
        counts = np.array([len(s) - 1 for s in sequences])
    return {
        "sent_more_score": scores[0::2],
        "sent_less_score": scores[1::2],
        "sent_more_tokens": counts[0::2],
        "sent_less_tokens": counts[1::2],
    }


CROWS_BIAS_TYPES = {"gender": "gender", "race": "race-color", "religion": "religion"}
"""The CrowS-Pairs bias type of each bias type of the erasers' word lists (``intervention.bias_type``)."""


def soft_surrogate(parts, *, temperature: float = 1.0):
    """The soft metric score as a fraction (``metrics.soft_metric_score`` / 100)."""
    from jaxassoc.metrics.crows_pairs import soft_metric_score

    return soft_metric_score(parts[0], parts[1], temperature)[None] / 100.0


def real_score(parts) -> np.ndarray:
    """The metric score (the authors' counting, rounded scores, neutral pairs in the denominator) as a fraction."""
    from jaxassoc.metrics.crows_pairs import metric_score, pair_outcomes

    return np.array([metric_score(pair_outcomes(np.asarray(parts[0]), np.asarray(parts[1]))) / 100.0])


def bias_term(model: LanguageModel, bias_type: str, seed: int, *, heldout: float, temperature: float | None = None):
    """CrowS-Pairs as a fine-tuning bias term (a causal LM; ``finetune.bias``): the soft metric score of the pairs
    of ``bias_type`` (its CrowS-Pairs type) toward 50 %, the pairs split into training and held-out pairs; the
    temperature ``temperature``, or (None) the largest of ``finetune.bias.TEMPERATURES`` whose soft score agrees
    with the real count on the training pairs under ``model`` (``finetune.bias.choose_temperature``)."""
    from jaxassoc.data.crows_pairs import load_crows_pairs
    from jaxassoc.finetune.bias import BiasTerm, smoothed_setup, split_items

    if model.objective != "causal":
        raise InputError(
            f"CrowS-Pairs as a fine-tuning bias term scores sentences with a causal LM; {model.name!r} is "
            f"{model.objective}: use intervention.objective=cda for it"
        )
    pairs = load_crows_pairs()
    kind = CROWS_BIAS_TYPES.get(bias_type, bias_type)
    pairs = pairs[pairs["bias_type"] == kind].reset_index(drop=True)
    if len(pairs) < 2:
        raise InputError(f"CrowS-Pairs has {len(pairs)} pairs of bias type {kind!r}: too few to train against")
    train, held = split_items(len(pairs), heldout, seed, f"CrowS-Pairs {kind} pairs")
    start = start_token(model, eos_fallback=True, what="CrowS-Pairs")
    arrays = pair_arrays(model, pairs["sent_more"].tolist(), pairs["sent_less"].tolist(), start)
    term = BiasTerm("crows_pairs", pair_log_likelihoods, soft_surrogate, real_score, target=0.5, units="share of pairs")
    return smoothed_setup(
        model, term, arrays, train, held, temperature, f"CrowS-Pairs soft metric score of {kind} pairs"
    )
