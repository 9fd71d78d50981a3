"""StereoSet candidate scores (Nadeem et al. 2021; docs/methods.md §7.2).

- Intrasentence, masked LM (the authors' rule): the candidate's template word is tokenised alone into
  t_1..t_k; step i fills the context's BLANK with t_<i (decoded) followed by one mask token, and reads
  p(t_i) at the mask; the score is the mean of those k probabilities. All steps of all candidates run
  batched (:func:`~jaxassoc.readouts.sentence_scores.masked_logprobs`).
- Intrasentence, causal LM: the geometric mean of the sentence's token probabilities, exp of their mean
  log-probability (the authors' per-token average). As the authors' script (``scoring="authors"``), the
  first token is scored after the start token alone and every later one after the earlier tokens of the
  sentence without the start token; ``scoring="start"`` keeps the start token in front of every token
  (what a model trained with a BOS expects). The start token is BOS, or EOS when the model has none
  (GPT-2's ``<|endoftext|>``, the authors' choice).
- Intersentence, causal LM: the same geometric mean over the tokens of the candidate sentence only, after
  the start token and the context (a context without final punctuation gets a full stop, as the
  authors' script; the candidate tokenised as " " + sentence after the context's tokens).
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


CAUSAL_SCORING = ("authors", "start")


def _context(context: str) -> str:
    """The authors' generative script ends a context without final punctuation with a full stop."""
    return context if context[-1:] in (".", "!", "?") else context + "."


def causal_candidates(
    model: LanguageModel, rows: pd.DataFrame, *, scoring: str = "authors", tokens_per_batch: int = 1024
) -> np.ndarray:
    """Geometric-mean token probability of each candidate (module docstring). ``scoring``: ``authors``
    scores an intrasentence candidate's first token after the start token and the others after the
    earlier tokens alone, as the authors' script; ``start`` scores every token after the start token."""
    start = start_token(model, eos_fallback=True, what="StereoSet")
    sequences, spans, firsts = [], [], []
    for row in rows.itertuples():
        if row.split == "intrasentence":
            prefix, scored = [start], _tokens(model, row.sentence, row.where)
        else:
            prefix = [start, *_tokens(model, _context(row.context), row.where)]
            scored = _tokens(model, " " + row.sentence, row.where)
        if len(prefix) + len(scored) > model.max_positions:
            raise InputError(
                f"{row.where}: {len(prefix) + len(scored)} tokens, more than the context of {model.name!r}"
            )
        authors = scoring == "authors" and row.split == "intrasentence"
        firsts.append(authors)
        sequences.append(scored if authors else prefix + scored)
        spans.append((0, len(scored) - 1) if authors else (len(prefix) - 1, len(prefix) + len(scored) - 1))
        if authors:
            sequences.append([start, scored[0]])  # p(first token | start token)
    rows_out = causal_token_rows(model, sequences, tokens_per_batch=tokens_per_batch)
    scores, at = [], 0
    for authors, (a, b) in zip(firsts, spans):
        logp = rows_out[at][a:b].astype(np.float64)
        if authors:
            logp = np.concatenate([rows_out[at + 1][:1].astype(np.float64), logp])
        scores.append(np.exp(logp.mean()))
        at += 2 if authors else 1
    return np.array(scores)


def score_candidates(
    model: LanguageModel,
    rows: pd.DataFrame,
    *,
    scoring: str = "authors",
    batch_size: int = 64,
    tokens_per_batch: int = 1024,
) -> np.ndarray:
    """The score of every candidate row of :func:`jaxassoc.data.stereoset.load_stereoset` (for a masked LM,
    intrasentence rows only: module docstring)."""
    if model.objective == "masked":
        if (rows["split"] != "intrasentence").any():
            raise InputError("a masked LM scores StereoSet's intrasentence split only; pass those rows")
        return masked_intrasentence(model, rows, batch_size=batch_size)
    return causal_candidates(model, rows, scoring=scoring, tokens_per_batch=tokens_per_batch)
