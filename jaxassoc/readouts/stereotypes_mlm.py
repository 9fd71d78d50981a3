"""ABC stereotype prompts (Cao et al. 2022) on a masked LM (BERT, RoBERTa) and their write-in steps, as the
authors' ``base_ilps.py`` / ``mod_ilps.py`` / ``quick_set.py`` (docs/methods.md §3).

For every (template, group or prior noun, trait word) the template is filled with the group and holds one
mask per trait subword. Write-in step i reads the head input x at mask i after subwords < i have been
written into masks < i; one forward pass per step, all prompts of a step batched together
(:func:`write_in_head_inputs`; the MLM head transform dense -> activation -> LayerNorm is part of the port's
``hidden``, the decoder is ``Head(W, b)``). ILPS, ILPS* and SeT from those head inputs:
:mod:`jaxassoc.suites.stereotypes_mlm`.

Prompts are assembled from token ids: the tokenizer's special tokens around the text before the trait
(trailing spaces stripped), the masks, and the text after it. A space before ``<mask>`` belongs to the
trait (``Ġ``-initial under BPE), as in a checkpoint whose mask token absorbs the space before it
(roberta-large's ``<mask>`` does); so the prompt with the subwords written in is exactly the tokenised
sentence. Every ABC template works: the trait need not end the prompt.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxassoc.data import AbcData
from jaxassoc.data.stereotypes import MASK
from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.models import LanguageModel, model_limits, run_batched
from jaxassoc.readouts.stereotypes import trait_tokens


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
