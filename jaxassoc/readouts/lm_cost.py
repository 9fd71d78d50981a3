"""The language-modelling cost of an intervention: WikiText-2 ``test`` perplexity (docs/methods.md §11.8).

A causal LM's perplexity is ``exp(-Σ log p(token | its sentence so far) / N)`` over the N tokens after each
sentence's start token; a masked LM's pseudo-perplexity (Salazar et al. 2020) takes each token's log-probability
with that one token masked. The text: WikiText-2 ``test`` (never the ``valid`` split the erasers fit on), its
sentences detokenised, those with ``<unk>`` left out (a placeholder, not text), taken in corpus order until
``max_tokens`` scored tokens; a sentence longer than the context (less what a scoring transform such as
Self-Debias's prefix takes) is skipped. Cached per model fingerprint, so
the model without its intervention is scored once per sweep.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxassoc import data
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.sentence_scores import (
    causal_log_likelihoods,
    check_masked_lm,
    pseudo_log_likelihoods,
    start_token,
)


class LmCost(NamedTuple):
    """``perplexity`` over ``tokens`` scored tokens of ``sentences`` WikiText-2 test sentences; ``kind``:
    ``perplexity`` (causal) or ``pseudo-perplexity`` (masked)."""

    perplexity: float
    tokens: int
    sentences: int
    kind: str


def wikitext_sequences(model: LanguageModel, max_tokens: int) -> tuple[list[list[int]], list[list[int]]]:
    """The token ids of the scored sentences (with the model's special tokens) and the positions scored in each:
    every token after the start token (causal) or every non-special token (masked), up to ``max_tokens``."""
    sentences = data.wikitext2_sentences("test", detokenize=True, drop_unk=True)
    special = set(model.tokenizer.all_special_ids)
    if model.objective == "causal":
        start = start_token(model, eos_fallback=True, what="the LM cost")
        encoded = [[start, *ids] for ids in model.tokenizer(sentences, add_special_tokens=False)["input_ids"]]
    else:
        encoded = model.tokenizer(sentences)["input_ids"]
    limit = model.max_positions - (model.scoring.reserved(model) if model.scoring is not None else 0)
    sequences, positions, total = [], [], 0
    for ids in encoded:
        if len(ids) > limit or len(ids) < 2:
            continue
        where = list(range(1, len(ids))) if model.objective == "causal" else [
            p for p, t in enumerate(ids) if t not in special
        ]  # fmt: skip
        if not where:
            continue
        sequences.append(list(ids))
        positions.append(where)
        total += len(where)
        if total >= max_tokens:
            break
    return sequences, positions


def lm_cost(
    model: LanguageModel,
    max_tokens: int,
    *,
    cache_dir: Path | None = None,
    progress: bool = False,
) -> LmCost:
    """``model``'s (pseudo-)perplexity on WikiText-2 test (module docstring); under its scoring transform
    (``model.with_scoring``: Self-Debias) where it has one."""
    if model.objective == "masked":
        check_masked_lm(model, "the LM cost (pseudo-perplexity)")
    sequences, positions = wikitext_sequences(model, max_tokens)

    def compute() -> dict[str, np.ndarray]:
        if model.objective == "causal":
            sums = causal_log_likelihoods(model, sequences, progress=progress)
        else:
            rows = pseudo_log_likelihoods(model, sequences, positions, progress=progress)
            sums = np.array([row.astype(np.float64).sum() for row in rows])
        return {"sums": np.asarray(sums, np.float64)}

    parts = {
        **model_key(model),
        "sequences": hashlib.sha256(json.dumps([sequences, positions]).encode()).hexdigest(),
    }
    sums = cached_arrays(cache_dir, "lm_cost", parts, compute)["sums"]
    tokens = sum(len(p) for p in positions)
    kind = "perplexity" if model.objective == "causal" else "pseudo-perplexity"
    return LmCost(math.exp(-float(sums.sum()) / tokens), tokens, len(sequences), kind)
