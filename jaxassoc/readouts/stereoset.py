"""StereoSet candidate scores (Nadeem et al. 2021; docs/methods.md §7.2).

- Intrasentence, masked LM (the authors' rule): the candidate's template word is tokenised alone into
  t_1..t_k; step i fills the context's BLANK with t_<i (decoded) followed by one mask token, and reads
  p(t_i) at the mask; the score is the mean of those k probabilities. All steps of all candidates run
  batched (:func:`~jaxassoc.readouts.sentence_scores.masked_logprobs`).
- Intrasentence, causal LM: the geometric mean of p(token | start token, earlier tokens) over the
  sentence's tokens, i.e. exp of the mean log-probability (the authors' per-token average), the start
  token being BOS (EOS when the model has none).
- Intersentence, causal LM: the same geometric mean over the tokens of the candidate sentence only, after
  the start token and the context (the candidate tokenised as " " + sentence, after the context's tokens).
- Intersentence needs a causal LM: the authors scored masked LMs there with BERT's next-sentence head,
  which jaxassoc's models do not carry, so a masked LM scores the intrasentence split only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.sentence_scores import causal_token_rows, check_masked_lm, masked_logprobs, start_token


def _tokens(model: LanguageModel, text: str, where: str) -> list[int]:
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    if not ids:
        raise InputError(f"{where}: {text!r} has no tokens")
    return ids


def masked_intrasentence(model: LanguageModel, rows: pd.DataFrame, *, batch_size: int = 64) -> np.ndarray:
    """Mean probability of each candidate's template-word tokens, written in left to right (module docstring)."""
    mask_id = check_masked_lm(model, "StereoSet's masked scoring")
    tok = model.tokenizer
    masked, filled, owner = [], [], []
    for n, row in enumerate(rows.itertuples()):
        word = _tokens(model, row.template_word, row.where)
        for i, token in enumerate(word):
            text = row.context.replace("BLANK", tok.decode(word[:i]) + tok.mask_token, 1)
            ids = tok(text)["input_ids"]
            if ids.count(mask_id) != 1:
                raise InputError(f"{row.where}: the prompt {text!r} does not hold exactly one mask token")
            if len(ids) > model.max_positions:
                raise InputError(f"{row.where}: {len(ids)} tokens, more than the context of {model.name!r}")
            masked.append(ids)
            filled.append([token if t == mask_id else t for t in ids])
            owner.append(n)
    logp = masked_logprobs(model, masked, filled, batch_size=batch_size)
    owner = np.array(owner)
    return np.array([np.exp(logp[owner == n].astype(np.float64)).mean() for n in range(len(rows))])


def causal_candidates(model: LanguageModel, rows: pd.DataFrame, *, tokens_per_batch: int = 1024) -> np.ndarray:
    """Geometric-mean token probability of each candidate (intrasentence: the whole sentence;
    intersentence: the sentence after its context; module docstring)."""
    start = start_token(model, eos_fallback=True, what="StereoSet")
    sequences, spans = [], []
    for row in rows.itertuples():
        if row.split == "intrasentence":
            prefix, scored = [start], _tokens(model, row.sentence, row.where)
        else:
            prefix, scored = (
                [start, *_tokens(model, row.context, row.where)],
                _tokens(model, " " + row.sentence, row.where),
            )
        if len(prefix) + len(scored) > model.max_positions:
            raise InputError(
                f"{row.where}: {len(prefix) + len(scored)} tokens, more than the context of {model.name!r}"
            )
        sequences.append(prefix + scored)
        spans.append((len(prefix) - 1, len(prefix) + len(scored) - 1))  # columns predicting the scored tokens
    per_token = causal_token_rows(model, sequences, tokens_per_batch=tokens_per_batch)
    return np.array([np.exp(row[a:b].astype(np.float64).mean()) for row, (a, b) in zip(per_token, spans)])


def score_candidates(
    model: LanguageModel, rows: pd.DataFrame, *, batch_size: int = 64, tokens_per_batch: int = 1024
) -> np.ndarray:
    """The score of every candidate row of :func:`jaxassoc.data.stereoset.load_stereoset` (for a masked LM,
    intrasentence rows only: module docstring)."""
    if model.objective == "masked":
        if (rows["split"] != "intrasentence").any():
            raise InputError("a masked LM scores StereoSet's intrasentence split only; pass those rows")
        return masked_intrasentence(model, rows, batch_size=batch_size)
    return causal_candidates(model, rows, tokens_per_batch=tokens_per_batch)
