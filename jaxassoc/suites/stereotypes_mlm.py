"""ABC stereotype measurements (Cao et al. 2022) on a masked LM (BERT, RoBERTa): ILPS, ILPS* and SeT by
write-in steps, as the authors' ``base_ilps.py`` / ``mod_ilps.py`` / ``quick_set.py`` (docs/methods.md §3).

From the head inputs of the write-in steps (:mod:`jaxassoc.readouts.stereotypes_mlm`):

- ILPS: log P(first subword) at the first mask of step 0 (plain softmax);
- ILPS*: the chain rule over the steps, step 0 renormalised by the word-initial mass, later steps by the
  continuation mass (``Ġ`` for BPE, ``##`` for WordPiece; built from the tokenizer). As in the original,
  a later subword that is itself word-initial (BERT's ``-`` in "self-assured") is still divided by the
  continuation mass;
- SeT: the exact single-context solution per subword (x̃ = [x; 1], A = [W | b]), the minimum over
  subwords, then the score transform and NaN policy of :mod:`jaxassoc.metrics.set_score`;

each minus the prior noun's in the same template (:func:`~jaxassoc.suites.stereotypes.scores_from_terms`).
The problems run in chunks of :data:`CHUNK_PROBLEMS` (all write-in steps of a chunk, then its head terms),
each cached as soon as it is done, so an interrupted run resumes at its first unfinished chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.data import AbcData
from jaxassoc.errors import InputError
from jaxassoc.models import LanguageModel
from jaxassoc.readouts.stereotypes import default_words
from jaxassoc.readouts.stereotypes_mlm import (
    MaskedProblems,
    build_masked_problems,
    check_masked_model,
    write_in_head_inputs,
)
from jaxassoc.suites.stereotypes import OptaxOptions, chunk_stage, collect_terms, head_terms, scores_from_terms

CHUNK_PROBLEMS = 512  # (filler, word) problems per cached chunk: about a ninth of a template


def masked_terms(
    model: LanguageModel,
    problems: MaskedProblems,
    *,
    batch_size: int = 32,
    cache_dir: Path | None = None,
    log_as: tuple[str, str] | None = None,
    set_optax: OptaxOptions | None = None,
) -> dict[str, np.ndarray]:
    """:func:`~jaxassoc.suites.stereotypes.head_terms` of every problem, :data:`CHUNK_PROBLEMS` problems at
    a time: each chunk's write-in steps and head terms are stored in ``cache_dir`` as soon as they are done,
    keyed by the model and the chunk's exact prompts and traits, so an interrupted run resumes at its first
    unfinished chunk. ``log_as=(job, where)`` logs one stage line per chunk, ``set_optax`` picks SeT's
    solver (as :func:`~jaxassoc.suites.stereotypes.causal_terms`)."""
    n, steps = len(problems.prompts), max(len(t) for t in problems.trait_tokens)
    parts: dict[str, np.ndarray] = {}
    chunks = [list(range(at, min(at + CHUNK_PROBLEMS, n))) for at in range(0, n, CHUNK_PROBLEMS)]
    for c, members in enumerate(chunks, start=1):
        part = problems._replace(
            prompts=[problems.prompts[m] for m in members],
            mask_starts=[problems.mask_starts[m] for m in members],
            trait_tokens=[problems.trait_tokens[m] for m in members],
        )

        def compute():
            return head_terms(model, *write_in_head_inputs(model, part, batch_size), set_optax=set_optax)

        key = {
            "model": model_key(model),
            "prompts": part.prompts,
            "mask_starts": part.mask_starts,
            "trait_tokens": part.trait_tokens,
            "batch_size": batch_size,
        } | ({} if set_optax is None else {"set_optax": set_optax.key()})  # the exact solver's keys unchanged
        with chunk_stage(log_as, c, len(chunks), len(members)):
            terms = cached_arrays(cache_dir, "stereotype_terms_masked", key, compute)
        collect_terms(parts, (n, steps), members, terms)
    return parts


def score_masked(
    model: LanguageModel,
    abc: AbcData,
    template: str,
    *,
    groups: Sequence[str] | None = None,
    words: Sequence[str] | None = None,
    set_transform: str = "neg_distance",
    set_nan_policy: str = "propagate",
    batch_size: int = 32,
    cache_dir: Path | None = None,
    log_as: tuple[str, str] | None = None,
    set_optax: OptaxOptions | None = None,
) -> pd.DataFrame:
    """ILPS, ILPS* and SeT of every (group, trait word) in ``template`` on a masked LM, minus the prior's.

    The same columns and defaults as :func:`~jaxassoc.suites.stereotypes.score_causal` (which
    has a ``bos`` switch; a masked LM's prompt always carries its special tokens); ``cache_dir``,
    ``log_as`` and ``set_optax``: see :func:`masked_terms`.
    """
    check_masked_model(model)
    slot = abc.slot_of(template)
    groups = list(abc.groups[slot] if groups is None else groups)
    words = default_words(abc) if words is None else list(words)
    if not words:
        raise InputError("score_masked: no trait words to score; pass at least one word (or words=None for all)")
    problems = build_masked_problems(model.tokenizer, abc, template, groups, words, mask_id=model.vocab.mask_id)
    terms = masked_terms(
        model, problems, batch_size=batch_size, cache_dir=cache_dir, log_as=log_as, set_optax=set_optax
    )
    valid = np.arange(terms["distance"].shape[1]) < np.array([len(t) for t in problems.trait_tokens])[:, None]
    return scores_from_terms(
        problems.fillers, words, terms, valid, set_transform=set_transform, set_nan_policy=set_nan_policy
    )
