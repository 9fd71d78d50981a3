"""ABC stereotype prompts (Cao et al. 2022) on a causal LM and the forward passes that read them
(docs/methods.md §3). Plain functions, no Hydra.

Causal adaptation: the trait must end the prompt, so only templates whose ``<mask>`` is followed by
nothing but final punctuation are usable; the prompt is the template up to the mask (e.g. "The doctor
is") and the trait is appended with a leading space. One teacher-forced pass per (group, trait word)
gives, at the position before each trait token, the head input x, from which the scores' next-token logits
(ILPS / ILPS*, chain rule over the trait's tokens) and SeT's problems follow. Every group is compared with the
prior noun ("person" / "people" / "People") in the same template. Whether a BOS token starts the prompt is
the ``bos`` switch (it changes small causal models' results markedly): record it with the results.

The prompts are packed end to end into rows (:func:`chunk_rows`) and run in batches of one shape
(:func:`packed_hidden`); :func:`causal_head_inputs` gives every problem's head inputs. The scores, their
table and the alignment with the human ratings: :mod:`jaxassoc.suites.stereotypes`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from jaxassoc.data import AbcData
from jaxassoc.data.stereotypes import MASK
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models import LanguageModel, model_limits
from jaxassoc.models.batching import check_sequences
from jaxassoc.models.multihost import Feeder
from jaxassoc.models.packing import pack_rows, packed_row

_TRAILING = " .?!"


ROW_LENGTH = 64  # tokens of a packed row of prompts (as jaxassoc.models.packing's default)


BATCHES_PER_CHUNK = 8  # the unit of caching and progress: about 500 prompts, a sixth of a template


class TraitProblems(NamedTuple):
    """Token sequences (prompt + trait) and where each trait starts, one per (filler, word)."""

    fillers: list[str]  # the groups, then the prior noun last
    words: list[str]
    sequences: list[list[int]]  # row-major over (filler, word)
    trait_starts: list[int]
    trait_tokens: list[list[int]]


def is_causal_template(template: str) -> bool:
    """True when ``<mask>`` is followed only by final punctuation."""
    head, sep, tail = template.partition(MASK)
    return bool(sep) and tail.strip(_TRAILING) == "" and head.strip() != ""


def causal_prefix(template: str, slot: str, filler: str) -> str:
    """The prompt before the trait: the template up to ``<mask>`` with the slot filled."""
    if not is_causal_template(template):
        raise ConfigError(
            f"template {template!r} cannot be scored by a causal LM: the trait slot must end the prompt "
            f"(use one of the templates whose {MASK} is followed only by punctuation)"
        )
    return template.partition(MASK)[0].replace(slot, filler).rstrip()


def default_words(abc: AbcData) -> list[str]:
    """Every synonym of every trait pole, each once, in the data's order."""
    return list(dict.fromkeys(w for syns in abc.traits.values() for w in syns))


def trait_tokens(tokenizer, word: str, *, leading_space: bool) -> list[int]:
    """The trait's token ids as they follow the prompt (``leading_space``: a space precedes the trait).

    InputError for a word that tokenises to nothing or to the tokenizer's unknown token: its scores would
    measure the model's guesses of ``[UNK]``, not of the trait.
    """
    ids = tokenizer.encode((" " if leading_space else "") + word, add_special_tokens=False)
    if not ids:
        raise InputError(f"trait word {word!r} tokenises to no tokens; pass non-empty trait words")
    unk = getattr(tokenizer, "unk_token_id", None)
    if unk is not None and unk in ids:
        raise InputError(
            f"trait word {word!r} tokenises to the unknown token {tokenizer.unk_token!r} "
            f"({tokenizer.convert_ids_to_tokens(ids)}): this tokenizer cannot score it; leave it out of "
            "`words` or use a model whose vocabulary covers it"
        )
    return ids


def build_problems(
    tokenizer, abc: AbcData, template: str, groups: Sequence[str], words: Sequence[str], *, bos_id: int | None
) -> TraitProblems:
    """Token sequences for every (group or prior, trait word) in one template (``bos_id``: prepend it)."""
    slot = abc.slot_of(template)
    fillers = list(groups) + [abc.priors[slot]]
    sequences, starts, traits = [], [], []
    for filler in fillers:
        prefix = tokenizer.encode(causal_prefix(template, slot, filler), add_special_tokens=False)
        prefix = ([bos_id] if bos_id is not None else []) + prefix
        for word in words:
            trait = trait_tokens(tokenizer, word, leading_space=True)
            sequences.append(prefix + trait)
            starts.append(len(prefix))
            traits.append(trait)
    return TraitProblems(fillers, list(words), sequences, starts, traits)


def _hidden(params, ids, segments, *, forward):
    return forward(params["body"], ids, segments).hidden


def packed_hidden(
    model: LanguageModel,
    sequences: Sequence[Sequence[int]],
    rows: Sequence[Sequence[int]],
    batch_rows: int,
    row_length: int,
) -> list[np.ndarray]:
    """The last hidden states (T, D) of ``sequences`` packed as ``rows`` (lists of sequence indices), in
    batches of exactly ``batch_rows`` rows of ``row_length`` tokens (empty rows pad the last), so the
    model compiles once for every chunk of every template."""
    feed = Feeder(model.params, model.mesh)
    batch_rows = feed.rows(batch_rows)
    pad_id = model_limits(model)["pad_id"]
    forward = functools.partial(_hidden, forward=model.forward)
    hidden: dict[int, np.ndarray] = {}
    for at in range(0, len(rows), batch_rows):
        ids = np.full((batch_rows, row_length), pad_id, np.int32)
        segments = np.zeros((batch_rows, row_length), np.int32)
        placed = []
        for r, members in enumerate(rows[at : at + batch_rows]):
            ids[r], segments[r], starts = packed_row(sequences, members, row_length, pad_id)
            placed += [(r, m, s) for m, s in zip(members, starts)]
        out = feed(forward, ids, segments)
        for r, m, start in placed:
            hidden[m] = out[r, start : start + len(sequences[m])]
    return [hidden[m] for m in sorted(hidden)]


def trait_inputs(hidden, problems: TraitProblems, members: Sequence[int], steps: int):
    """x (n, steps, D) at the positions predicting each trait token of ``members``, their tokens and mask."""
    x = np.zeros((len(members), steps, hidden[0].shape[-1]), np.float32)
    tokens = np.zeros((len(members), steps), np.int32)
    valid = np.zeros((len(members), steps), bool)
    for n, (h, m) in enumerate(zip(hidden, members)):
        start, trait = problems.trait_starts[m], problems.trait_tokens[m]
        x[n, : len(trait)] = h[start - 1 : start - 1 + len(trait)]
        tokens[n, : len(trait)], valid[n, : len(trait)] = trait, True
    return x, tokens, valid


def chunk_rows(
    problems: TraitProblems, batch_rows: int, row_length: int, batches_per_chunk: int = BATCHES_PER_CHUNK
) -> list[list[list[int]]]:
    """The template's sequences packed into rows of ``row_length`` tokens, cut into chunks of
    ``batches_per_chunk`` batches of ``batch_rows`` rows: the unit of work that is cached and logged."""
    size = batch_rows * batches_per_chunk
    rows = pack_rows([len(s) for s in problems.sequences], row_length)
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def causal_layout(model: LanguageModel, problems: TraitProblems, batch_size: int):
    """Trait steps, packed rows per batch, the row length and the chunks of rows (see :func:`jaxassoc.suites.stereotypes.causal_terms`)."""
    limits = model_limits(model)
    check_sequences(problems.sequences, limits["max_length"], limits["vocab_size"])
    steps = max(len(t) for t in problems.trait_tokens)
    batch_rows = max(1, batch_size // 4)
    row_length = min(max(ROW_LENGTH, *map(len, problems.sequences)), limits["max_length"])
    return steps, batch_rows, row_length, chunk_rows(problems, batch_rows, row_length)


def causal_head_inputs(model: LanguageModel, problems: TraitProblems, *, batch_size: int = 32):
    """x (N, S, D) at the positions predicting each trait token, the tokens and their mask (N, S), packed and
    batched as :func:`jaxassoc.suites.stereotypes.causal_terms` does, without caching."""
    steps, batch_rows, row_length, chunks = causal_layout(model, problems, batch_size)
    n, dim = len(problems.sequences), model.head.W.shape[1]
    x, tokens, valid = np.zeros((n, steps, dim), np.float32), np.zeros((n, steps), np.int32), np.zeros((n, steps), bool)
    for rows in chunks:
        members = sorted(m for row in rows for m in row)
        hidden = packed_hidden(model, problems.sequences, rows, batch_rows, row_length)
        x[members], tokens[members], valid[members] = trait_inputs(hidden, problems, members, steps)
    return x, tokens, valid
