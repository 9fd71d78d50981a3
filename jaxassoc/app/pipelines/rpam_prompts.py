"""Host side of RPAM: templates, attribute tokenisation, and the batched forward passes that give the
arrays the kernels in :mod:`jaxassoc.metrics.rpam` take (Hodel et al. 2026, §4, App. D-E).

For T targets and an attribute set C:

- the first-token logits of every attribute (only the rows of C's first tokens are kept) and the
  full-vocabulary log-partition at the prompt's last position;
- for each multi-token attribute, the prompt followed by its subwords, from which the probabilities of
  subwords 2..k are read at once (left to right, App. E); the first-token logits come from the same
  pass, so the prompt alone is run only when every attribute is a single token.

Attributes are tokenised as they would follow the prompt: with a leading space after a word (TP1:
``... and`` + `` math``), without one after an opening quote (TP2: ``... and "`` + ``math``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxassoc.app.cache import cached_arrays, model_key
from jaxassoc.app.config import template_slots
from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import FINE_BUCKETS, model_limits, run_batched
from jaxassoc.models.heads import head_logits, last_positions

@dataclasses.dataclass(frozen=True)
class PromptTemplate:
    """A prompt with a ``{target}`` slot; the attribute is the model's continuation."""

    name: str
    text: str
    quote: str = '"'

    def __post_init__(self) -> None:
        template_slots(self.name, self.text)  # ConfigError for a malformed text, no {target}, unknown slots

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
    n_sequences: int  # forward-pass rows actually run (after deduplication)


PROMPT_BUCKETS = FINE_BUCKETS  # RPAM prompts are short (TP1 ~ 10 tokens)


ROW_MULTIPLE = 64
"""Attribute rows are padded to a multiple of this, so tests with similar |C| share one compilation."""


@functools.partial(jax.jit, static_argnames=("forward", "window"))
def _window_scores(params, input_ids, attention_mask, *, forward, window):
    """At the last ``window + 1`` positions of each row: the logits of the rows ``params["rows"]`` (the
    attributes' first tokens), the log-partition, and the log-probability of the next token (full
    vocabulary); the head runs at those positions only.

    Index j is position ``last - window + j`` (clamped at 0); the next-token entry at j = window is 0.
    """
    hidden = forward(params["body"], input_ids, attention_mask).hidden
    last = last_positions(attention_mask)
    positions = jnp.maximum(last[:, None] - window + jnp.arange(window + 1)[None, :], 0)
    picked = jnp.take_along_axis(hidden, positions[..., None], axis=1)
    logits = head_logits(params["head"], picked).astype(jnp.float32)
    log_partition = jax.nn.logsumexp(logits, axis=-1)
    following = jnp.take_along_axis(input_ids, jnp.minimum(positions + 1, input_ids.shape[1] - 1), axis=1)
    next_logprob = jnp.take_along_axis(logits, following[..., None], axis=-1)[..., 0] - log_partition
    next_logprob = next_logprob.at[:, -1].set(0.0)
    return logits[..., params["rows"]], log_partition, next_logprob


def rpam_inputs(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Attributes,
    template: PromptTemplate,
    *,
    add_bos: bool | None = None,
    batch_size: int = 32,
    shard: bool | Mesh = False,
    progress: bool = False,
    buckets: Sequence[int] = PROMPT_BUCKETS,
) -> RpamInputs:
    """Run the prompts of every target and read what RPAM needs (see the module docstring).

    One pass per (target, multi-token attribute): the prompt followed by the attribute's subwords gives
    both the first-token logits at the prompt's last position (identical under causal attention to a
    pass over the prompt alone) and the subword probabilities, so the prompt-only pass is run only when
    every attribute is a single token. Identical sequences run once, and the head is evaluated only at
    the last few positions of each row.
    """
    prompts = encode_prompts(model, [template.fill(t) for t in targets], add_bos=add_bos)
    longest = max(len(a) for a in attributes.token_ids)
    for target, ids in zip(targets, prompts):
        if len(ids) + longest > model.max_positions:
            raise InputError(
                f"target {target[:60]!r}: its prompt has {len(ids)} tokens, which with the longest attribute "
                f"({longest} tokens) exceeds the context of {model.max_positions} tokens of model {model.name!r}"
            )
    multi = attributes.multi_token
    suffixes = [attributes.token_ids[c] for c in multi] or [()]
    # (target, attribute or None) -> row of the deduplicated sequence list
    unique: dict[tuple[int, ...], int] = {}
    where: dict[tuple[int, int | None], int] = {}
    for t, prompt in enumerate(prompts):
        for c, suffix in zip(multi or (None,), suffixes):
            where[t, c] = unique.setdefault(tuple(prompt) + tuple(suffix), len(unique))
    sequences = [list(seq) for seq in unique]
    window = longest if multi else 0  # the prompt's last position is last - k for a k-token suffix
    rows = np.zeros(-(-len(attributes.words) // ROW_MULTIPLE) * ROW_MULTIPLE, dtype=np.int32)
    rows[: len(attributes.words)] = attributes.first_ids
    fn = functools.partial(_window_scores, forward=model.forward, window=window)
    outs = run_batched(
        fn, {**model.params, "rows": jnp.asarray(rows)}, sequences, batch_size=batch_size, **model_limits(model),
        shard=shard, progress=progress, per_token=False, buckets=buckets,
    )
    T, C = len(targets), len(attributes.words)
    first_logits = np.empty((T, C), dtype=np.float32)
    log_partition = np.empty(T, dtype=np.float64)
    continuation = np.ones((T, C), dtype=np.float64)
    for t in range(T):
        c0 = multi[0] if multi else None
        k0 = len(attributes.token_ids[c0]) if multi else 0
        scores, lse, _ = outs[where[t, c0]]
        first_logits[t] = scores[window - k0, :C]  # the prompt's last position
        log_partition[t] = lse[window - k0]
        for c in multi:
            k = len(attributes.token_ids[c])
            next_logprob = outs[where[t, c]][2]
            # subwords 2..k are predicted at positions last-k+1 .. last-1
            continuation[t, c] = np.exp(next_logprob[window - k + 1 : window]).mean()
    return RpamInputs(first_logits, continuation.astype(np.float32), log_partition, len(multi), len(sequences))


def cached_rpam_inputs(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Attributes,
    template: PromptTemplate,
    *,
    cache_dir: Path | None = None,
    add_bos: bool | None = None,
    batch_size: int = 32,
    shard: bool | Mesh = False,
    progress: bool = False,
    buckets: Sequence[int] = PROMPT_BUCKETS,
) -> RpamInputs:
    """:func:`rpam_inputs` through the on-disk cache (:mod:`jaxassoc.app.cache`; ``cache_dir=None``: off).

    The key holds what decides the arrays bit for bit: the model (weights, tokenizer, dtypes), the filled
    prompts, BOS, the attributes' token ids, and the batching (batch size, buckets, devices). Statistics
    options and ``normalise`` are not in it, so the ablation and other statistics reuse the passes.
    """
    parts = {
        **model_key(model),
        "prompts": [template.fill(t) for t in targets],
        "add_bos": model.vocab.add_bos if add_bos is None else add_bos,
        "attribute_ids": [list(ids) for ids in attributes.token_ids],
        "batch_size": batch_size,
        "buckets": list(buckets),
        "devices": jax.device_count() if shard is not False else 1,
        **({"mesh": dict(shard.shape)} if isinstance(shard, Mesh) else {}),  # fsdp/tp change the sums
    }

    def compute() -> dict[str, np.ndarray]:
        inputs = rpam_inputs(model, targets, attributes, template, add_bos=add_bos, batch_size=batch_size,
                             shard=shard, progress=progress, buckets=buckets)
        return {f.name: np.asarray(getattr(inputs, f.name)) for f in dataclasses.fields(RpamInputs)}

    arrays = cached_arrays(cache_dir, "rpam_inputs", parts, compute)
    return RpamInputs(arrays["first_logits"], arrays["continuation"], arrays["log_partition"],
                      int(arrays["n_multi_token"]), int(arrays["n_sequences"]))
