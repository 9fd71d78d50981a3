"""ABC stereotype measurements (Cao et al. 2022) on a masked LM (BERT, RoBERTa): ILPS, ILPS* and SeT by
write-in steps, as the authors' ``base_ilps.py`` / ``mod_ilps.py`` / ``quick_set.py`` (docs/methods.md §3).

For every (template, group or prior noun, trait word) the template is filled with the group and holds one
mask per trait subword. Write-in step i reads the head input x at mask i after subwords < i have been
written into masks < i; one forward pass per step, all prompts of a step batched together. From those
head inputs (the MLM head transform dense -> activation -> LayerNorm is part of the port's ``hidden``, the
decoder is ``Head(W, b)``):

- ILPS: log P(first subword) at the first mask of step 0 (plain softmax);
- ILPS*: the chain rule over the steps, step 0 renormalised by the word-initial mass, later steps by the
  continuation mass (``Ġ`` for BPE, ``##`` for WordPiece; built from the tokenizer). As in the original,
  a later subword that is itself word-initial (BERT's ``-`` in "self-assured") is still divided by the
  continuation mass;
- SeT: the exact single-context solution per subword (x̃ = [x; 1], A = [W | b]), the minimum over
  subwords, then the score transform and NaN policy of :mod:`jaxassoc.metrics.set_score`;

each minus the prior noun's in the same template (:func:`~jaxassoc.readouts.stereotypes.scores_from_terms`).
The problems run in chunks of :data:`CHUNK_PROBLEMS` (all write-in steps of a chunk, then its head terms),
each cached as soon as it is done, so an interrupted run resumes at its first unfinished chunk.

Prompts are assembled from token ids: the tokenizer's special tokens around the text before the trait
(trailing spaces stripped), the masks, and the text after it. A space before ``<mask>`` belongs to the
trait (``Ġ``-initial under BPE), as in a checkpoint whose mask token absorbs the space before it
(roberta-large's ``<mask>`` does); so the prompt with the subwords written in is exactly the tokenised
sentence. Every ABC template works: the trait need not end the prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.data import AbcData
from jaxassoc.data.stereotypes import MASK
from jaxassoc.errors import ConfigError, InputError, ModelError
from jaxassoc.models import LanguageModel, model_limits, run_batched
from jaxassoc.readouts.stereotypes import (
    OptaxOptions,
    chunk_stage,
    collect_terms,
    default_words,
    head_terms,
    scores_from_terms,
    trait_tokens,
)

CHUNK_PROBLEMS = 512  # (filler, word) problems per cached chunk: about a ninth of a template


class MaskedProblems(NamedTuple):
    """One masked prompt per (filler, word), row-major, with one mask per trait subword."""

    fillers: list[str]  # the groups, then the prior noun last
    words: list[str]
    prompts: list[list[int]]
    mask_starts: list[int]  # position of the first mask (the trait's first subword)
    trait_tokens: list[list[int]]


def masked_template_parts(template: str, slot: str, filler: str) -> tuple[str, str]:
    """The text before the trait (slot filled, trailing spaces kept) and the text after it."""
    if template.count(MASK) != 1 or template.count(slot) != 1:
        raise ConfigError(f"template {template!r} must hold exactly one {MASK} and one {slot}")
    before, _, after = template.replace(slot, filler).partition(MASK)
    return before, after


def special_tokens(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a single text (``[CLS]``/``[SEP]``, ``<s>``/``</s>``)."""
    bare = tokenizer.encode("a", add_special_tokens=False)
    full = tokenizer.encode("a")
    for k in range(len(full) - len(bare) + 1):
        if full[k : k + len(bare)] == bare:
            return full[:k], full[k + len(bare) :]
    raise ModelError(f"cannot find the special tokens of {type(tokenizer).__name__}: {full} does not hold {bare}")


def build_masked_problems(
    tokenizer, abc: AbcData, template: str, groups: Sequence[str], words: Sequence[str], *, mask_id: int
) -> MaskedProblems:
    """Masked prompts for every (group or prior, trait word) in one template (see the module docstring)."""
    slot = abc.slot_of(template)
    fillers = list(groups) + [abc.priors[slot]]
    first, last = special_tokens(tokenizer)
    prompts, starts, traits = [], [], []
    for filler in fillers:
        before, after = masked_template_parts(template, slot, filler)
        head = tokenizer.encode(before.rstrip(), add_special_tokens=False) if before.strip() else []
        tail = tokenizer.encode(after, add_special_tokens=False) if after else []
        for word in words:
            trait = trait_tokens(tokenizer, word, leading_space=before != before.rstrip())
            prompts.append(first + head + [mask_id] * len(trait) + tail + last)
            starts.append(len(first) + len(head))
            traits.append(trait)
    return MaskedProblems(fillers, list(words), prompts, starts, traits)


@functools.partial(jax.jit, static_argnames=("forward", "mask_id"))
def _first_mask_hidden(params, ids, mask, *, forward, mask_id: int):
    """Head input (float32) at each row's first mask — the write-in step's open position."""
    hidden = forward(params["body"], ids, mask).hidden
    position = jnp.argmax(ids == mask_id, axis=1)
    return jnp.take_along_axis(hidden, position[:, None, None], axis=1)[:, 0].astype(jnp.float32)


def write_in_head_inputs(model: LanguageModel, problems: MaskedProblems, batch_size: int = 32):
    """x (N, S, D) at mask i after writing subwords < i in, the trait tokens (N, S) and their mask.

    One :func:`~jaxassoc.models.run_batched` call per step over every prompt with more than i subwords.
    """
    fn = functools.partial(_first_mask_hidden, forward=model.forward, mask_id=int(model.vocab.mask_id))
    traits = problems.trait_tokens
    N, S, D = len(traits), max(len(t) for t in traits), model.head.W.shape[1]
    x = np.zeros((N, S, D), np.float32)
    tokens = np.zeros((N, S), np.int32)
    valid = np.zeros((N, S), bool)
    for n, trait in enumerate(traits):
        tokens[n, : len(trait)], valid[n, : len(trait)] = trait, True
    for step in range(S):
        rows = np.flatnonzero(valid[:, step])
        sequences = []
        for n in rows:
            ids, start = list(problems.prompts[n]), problems.mask_starts[n]
            ids[start : start + step] = traits[n][:step]
            sequences.append(ids)
        out = run_batched(
            fn,
            model.params,
            sequences,
            batch_size=batch_size,
            per_token=False,
            mesh=model.mesh,
            **model_limits(model),
        )
        x[rows, step] = np.stack(out)
    return x, tokens, valid


def check_masked_model(model: LanguageModel) -> None:
    """ConfigError unless ``model`` is a masked LM with its MLM head and a mask token."""
    if model.objective != "masked":
        raise ConfigError(f"score_masked needs a masked LM; {model.name!r} is {model.objective}")
    if model.head is None or model.vocab.mask_id is None:
        raise ConfigError(
            f"{model.name!r} has no MLM head or no mask token (an encoder-only checkpoint?): ILPS and SeT need "
            "a *ForMaskedLM checkpoint"
        )


def masked_terms(
    model: LanguageModel,
    problems: MaskedProblems,
    *,
    batch_size: int = 32,
    cache_dir: Path | None = None,
    log_as: tuple[str, str] | None = None,
    set_optax: OptaxOptions | None = None,
) -> dict[str, np.ndarray]:
    """:func:`~jaxassoc.readouts.stereotypes.head_terms` of every problem, :data:`CHUNK_PROBLEMS` problems at
    a time: each chunk's write-in steps and head terms are stored in ``cache_dir`` as soon as they are done,
    keyed by the model and the chunk's exact prompts and traits, so an interrupted run resumes at its first
    unfinished chunk. ``log_as=(job, where)`` logs one stage line per chunk, ``set_optax`` picks SeT's
    solver (as :func:`~jaxassoc.readouts.stereotypes.causal_terms`)."""
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

    The same columns and defaults as :func:`~jaxassoc.readouts.stereotypes.score_causal` (which
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
