"""Host side of RPAM: templates, attribute tokenisation, and the batched forward passes that give the
arrays the kernels in :mod:`jaxassoc.metrics.rpam` take (Hodel et al. 2026, §4, App. D-E).

For T targets and an attribute set C:

- one forward pass per target prompt gives the first-token logits of every attribute (only the rows of
  C's first tokens are read from the head) and the full-vocabulary log-partition at the last position;
- each multi-token attribute needs one more pass per target: the prompt followed by its subwords, from
  which the probabilities of subwords 2..k are read at once (left to right, App. E).

Attributes are tokenised as they would follow the prompt: with a leading space after a word (TP1:
``... and`` + `` math``), without one after an opening quote (TP2: ``... and "`` + ``math``).
"""

from __future__ import annotations

import dataclasses
import functools
import string
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import run_batched
from jaxassoc.models.heads import gather_positions, head_logits, last_positions

TEMPLATE_FIELDS = frozenset({"target", "quote"})


@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    """A prompt with a ``{target}`` slot; the attribute is the model's continuation."""

    name: str
    text: str
    quote: str = '"'

    def __post_init__(self) -> None:
        fields = {f for _, f, _, _ in string.Formatter().parse(self.text) if f is not None}
        if "target" not in fields:
            raise InputError(f"template {self.name!r} has no {{target}} slot: {self.text!r}")
        unknown = fields - TEMPLATE_FIELDS
        if unknown:
            raise InputError(
                f"template {self.name!r} has unknown slots {sorted(unknown)}; the slots are {{target}} and {{quote}}"
            )

    def fill(self, target: str) -> str:
        if not target.strip():
            raise InputError(f"template {self.name!r}: empty target")
        return self.text.format(target=target, quote=self.quote)

    @property
    def attribute_prefix(self) -> str:
        """A space when the prompt ends in a word (TP1), none after a quote or bracket (TP2)."""
        last = self.text.format(target="x", quote=self.quote).rstrip(" ")[-1:]
        return " " if last.isalnum() or last in ",;:.!?" else ""


@dataclasses.dataclass(frozen=True)
class Attributes:
    """An attribute set C = A ∪ B, tokenised as continuations of a template."""

    words: tuple[str, ...]
    token_ids: tuple[tuple[int, ...], ...]

    @property
    def first_ids(self) -> np.ndarray:
        return np.array([ids[0] for ids in self.token_ids], dtype=np.int32)

    @property
    def multi_token(self) -> tuple[int, ...]:
        """Indices of the attributes with more than one token."""
        return tuple(i for i, ids in enumerate(self.token_ids) if len(ids) > 1)


def tokenize_attributes(tokenizer, words: Sequence[str], template: PromptTemplate) -> Attributes:
    """Tokenise each attribute as it follows the template; refuses duplicates and empty tokenisations."""
    seen: set[str] = set()
    duplicates = [w for w in words if w in seen or seen.add(w)]
    if duplicates:
        raise InputError(f"attribute set has duplicates {sorted(set(duplicates))}; each attribute must be unique")
    ids = []
    for word in words:
        tokens = tokenizer(template.attribute_prefix + word, add_special_tokens=False)["input_ids"]
        if not word.strip() or not tokens:
            raise InputError(f"attribute {word!r} tokenises to nothing")
        ids.append(tuple(int(t) for t in tokens))
    return Attributes(words=tuple(words), token_ids=tuple(ids))


def encode_prompts(model: LanguageModel, prompts: Sequence[str], *, add_bos: bool | None = None) -> list[list[int]]:
    """Token ids of each prompt, with BOS when asked (None: the tokenizer's default)."""
    bos = model.vocab.add_bos if add_bos is None else add_bos
    encoded = []
    for prompt in prompts:
        ids = model.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        if bos:
            if model.vocab.bos_id is None:
                raise InputError(f"add_bos is on but model {model.name!r} has no BOS token")
            ids = [model.vocab.bos_id, *ids]
        encoded.append(ids)
    return encoded


@dataclasses.dataclass(frozen=True)
class RpamInputs:
    """What the RPAM kernels take, for T targets and C attributes."""

    first_logits: np.ndarray  # (T, C)
    continuation: np.ndarray  # (T, C): mean full-vocabulary probability of subwords 2..k (1: single token)
    log_partition: np.ndarray  # (T,): log-sum-exp over the vocabulary at the first position
    n_multi_token: int  # number of multi-token attributes


def _last_position_scores(params, input_ids, attention_mask, *, forward, rows):
    """First-token logits of the attributes and the log-partition, at each prompt's last token."""
    hidden = forward(params["body"], input_ids, attention_mask).hidden
    logits = head_logits(params["head"], gather_positions(hidden, last_positions(attention_mask)))
    logits = logits.astype(jnp.float32)
    return logits[:, rows], jax.nn.logsumexp(logits, axis=-1)


def _sequence_logprobs(params, input_ids, attention_mask, *, forward):
    """log p(token t+1 | ≤ t) at every position (full vocabulary)."""
    hidden = forward(params["body"], input_ids, attention_mask).hidden
    logp = jax.nn.log_softmax(head_logits(params["head"], hidden[:, :-1]).astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(logp, input_ids[:, 1:, None], axis=-1)[..., 0]


def rpam_inputs(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Attributes,
    template: PromptTemplate,
    *,
    add_bos: bool | None = None,
    batch_size: int = 32,
    shard: bool = False,
    progress: bool = False,
) -> RpamInputs:
    """Run the prompts of every target and read what RPAM needs (see the module docstring)."""
    prompts = encode_prompts(model, [template.fill(t) for t in targets], add_bos=add_bos)
    for target, ids in zip(targets, prompts):
        longest = max(len(a) for a in attributes.token_ids)
        if len(ids) + longest > model.max_positions:
            raise InputError(
                f"target {target[:60]!r}: its prompt has {len(ids)} tokens, which with the longest attribute "
                f"({longest} tokens) exceeds the context of {model.max_positions} tokens of model {model.name!r}"
            )
    common = dict(batch_size=batch_size, pad_id=_pad_id(model), max_length=model.max_positions, shard=shard)
    fn = jax.jit(functools.partial(_last_position_scores, forward=model.forward, rows=jnp.asarray(attributes.first_ids)))
    outs = run_batched(fn, model.params, prompts, progress=progress, per_token=False, **common)
    first_logits = np.stack([np.asarray(o[0]) for o in outs])
    log_partition = np.array([float(o[1]) for o in outs])
    continuation = np.ones_like(first_logits)
    multi = attributes.multi_token
    if multi:
        pairs = [(t, c) for t in range(len(targets)) for c in multi]
        sequences = [prompts[t] + list(attributes.token_ids[c]) for t, c in pairs]
        seq_fn = jax.jit(functools.partial(_sequence_logprobs, forward=model.forward))
        logprobs = run_batched(seq_fn, model.params, sequences, per_token=False, **common)
        for (t, c), lp, seq in zip(pairs, logprobs, sequences):
            k = len(attributes.token_ids[c])
            # positions of subwords 2..k among the next-token log-probs of the (unpadded) sequence
            sub = np.asarray(lp)[len(seq) - k : len(seq) - 1]
            continuation[t, c] = float(np.exp(sub).mean())
    return RpamInputs(first_logits, continuation, log_partition, len(multi))


def _pad_id(model: LanguageModel) -> int:
    for candidate in (model.vocab.pad_id, model.vocab.eos_id, 0):
        if candidate is not None:
            return int(candidate)
    return 0
