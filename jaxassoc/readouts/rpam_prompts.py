"""Host side of RPAM: templates, attribute tokenisation, and the batched forward passes that give the
arrays the kernels in :mod:`jaxassoc.metrics.rpam` take (Hodel et al. 2026, §4, App. D-E).

For T targets and an attribute set C:

- the first-token logits of every attribute (only the rows of C's first tokens are kept) and the
  full-vocabulary log-partition at the prompt's last position;
- for each multi-token attribute the task needs, the probabilities of subwords 2..k, each read left to
  right with the earlier subwords appended (App. E): each distinct prompt runs once, and the subwords of
  all its needed attributes run packed after it in the same pass, attending to the prompt's keys and values
  (:mod:`jaxassoc.models.continuations`), so a continuation costs its own tokens only.

Attributes are tokenised as they would follow the prompt: with a leading space after a word (TP1:
``... and`` + `` math``), without one after an opening quote (TP2: ``... and "`` + ``math``).

An encoder-decoder model (T5) is read by :mod:`jaxassoc.readouts.rpam_seq2seq` instead: the same
arrays from the decoder's first and following steps.
"""

from __future__ import annotations

import dataclasses
import functools
import string
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import FINE_BUCKETS, bucket_length, check_sequences, model_limits, pad_batch
from jaxassoc.models.continuations import pack_continuations, prefix_and_continuations
from jaxassoc.models.heads import head_logits
from jaxassoc.models.multihost import Feeder, in_batches
from jaxassoc.readouts.rpam_seq2seq import encode_encoder_prompts, seq2seq_factors

TEMPLATE_SLOTS = frozenset({"target", "quote"})


def template_slots(name: str, text: str) -> set[str]:
    """The ``{slots}`` of a template text; ConfigError for an unclosed ``{``, a lone ``}``, a missing
    ``{target}`` or a slot other than ``{target}`` and ``{quote}``."""
    try:
        slots = {f for _, f, _, _ in string.Formatter().parse(text) if f is not None}
    except ValueError as e:
        raise ConfigError(
            f"template {name!r}: text {text!r} is malformed ({e}); write a literal brace as {{{{ or }}}}"
        ) from None
    if "target" not in slots:
        raise ConfigError(f"template {name!r} has no {{target}} slot: {text!r}")
    unknown = slots - TEMPLATE_SLOTS
    if unknown:
        raise ConfigError(
            f"template {name!r} has unknown slots {sorted(unknown)} in {text!r}; the slots are {{target}} and {{quote}}"
        )
    return slots


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
    continuation: np.ndarray  # (T, C): mean full-vocabulary probability of subwords 2..k (1: single token;
    # NaN for a (target, multi-token attribute) pair the task did not ask for)
    log_partition: np.ndarray  # (T,): log-sum-exp over the vocabulary at the first position
    n_multi_token: int  # number of multi-token attributes
    n_sequences: int  # forward-pass rows actually run (distinct prompts, more when one needs several rows)
    n_continuations: int  # distinct (prompt, multi-token attribute) continuations scored


PROMPT_BUCKETS = FINE_BUCKETS  # RPAM prompts are short (TP1 ~ 10 tokens)
CONTINUATION_BUCKETS = (4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)
"""Packed-continuation lengths (columns after the prompt); a prompt needing more runs in several rows."""


ROW_MULTIPLE = 64
"""Attribute rows are padded to a multiple of this, so tests with similar |C| share one compilation."""


@functools.partial(jax.jit, static_argnames=("decoder",))
def _prompt_scores(params, prompt_ids, prompt_mask, inputs, targets, segments, *, decoder):
    """At each prompt's last token: the logits of the rows ``params["rows"]`` (the attributes' first
    tokens) and the log-partition; and log P_V of the subwords packed after the prompt
    (:func:`jaxassoc.models.continuations.prefix_and_continuations`, the head at those positions only)."""
    last, continuation = prefix_and_continuations(
        params, prompt_ids, prompt_mask, inputs, targets, segments, decoder=decoder
    )
    logits = head_logits(params["head"], last).astype(jnp.float32)
    return logits[:, params["rows"]], jax.nn.logsumexp(logits, axis=-1), continuation


def _work_rows(prompts: list[tuple[int, ...]], continuations: list[list[tuple[int, ...]]], cap: int):
    """``(prompt, continuations)`` rows: each prompt once, its continuations packed in order, a new row
    (the prompt again) whenever the next one would pass ``cap`` packed columns."""
    rows = []
    for prompt, conts in zip(prompts, continuations):
        row, used = [], 0
        for tokens in conts:
            if row and used + len(tokens) - 1 > cap:
                rows.append((prompt, row))
                row, used = [], 0
            row.append(tokens)
            used += len(tokens) - 1
        rows.append((prompt, row))
    return rows


def _run_rows(
    model: LanguageModel,
    params: dict,
    rows,
    *,
    batch_size: int,
    mesh: Mesh | None,
    progress: bool,
    buckets: Sequence[int],
) -> list:
    """:func:`_prompt_scores` over the work rows in batches of one fixed size, sorted by packed then prompt
    length, prompts left-padded to a length bucket, packed continuations to a continuation bucket (0 when
    none in the batch); one output tuple per row, in order."""
    limits = model_limits(model)
    check_sequences([list(p) for p, _ in rows], limits["max_length"], limits["vocab_size"])
    check_sequences([list(t) for _, conts in rows for t in conts] or [[0]], None, limits["vocab_size"])
    feed = Feeder(params, mesh)
    B = feed.rows(min(batch_size, 1 << (len(rows) - 1).bit_length()))
    packed = [sum(len(t) - 1 for t in conts) for _, conts in rows]
    order = sorted(range(len(rows)), key=lambda i: (packed[i], len(rows[i][0])))
    fn = functools.partial(_prompt_scores, decoder=model.decoder)
    results: list = [None] * len(rows)
    for group in in_batches([order[i : i + B] for i in range(0, len(order), B)], progress):
        P = bucket_length(max(len(rows[i][0]) for i in group), buckets, limits["max_length"])
        n = max(packed[i] for i in group)
        L = bucket_length(n, CONTINUATION_BUCKETS, None) if n else 0
        ids, mask = pad_batch([list(rows[i][0]) for i in group], P, B, limits["pad_id"], "left")
        cont = np.zeros((3, B, L), dtype=np.int32)
        for r, i in enumerate(group):
            cont[:, r] = pack_continuations(rows[i][1], L)
        out = feed(fn, ids, mask, *cont)
        for r, i in enumerate(group):
            results[i] = tuple(leaf[r] for leaf in out)
    return results


def rpam_inputs(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Attributes,
    template: PromptTemplate,
    *,
    needed: np.ndarray | None = None,
    add_bos: bool | None = None,
    batch_size: int = 32,
    mesh: Mesh | None = None,
    progress: bool = False,
    buckets: Sequence[int] = PROMPT_BUCKETS,
) -> RpamInputs:
    """Run the prompts of every target and read what RPAM needs (see the module docstring).

    ``needed`` (bool, T x C; None: all) marks the (target, attribute) pairs whose continuation factor the
    task reads, e.g. each WS-353 pair's partner; the others are NaN in ``continuation``. The first-token
    logits and the log-partition cover all of C (the softmax over C needs them). Each distinct prompt runs
    once, and the subwords 2..k of all its distinct needed multi-token attributes run packed after it in
    the same pass, over its keys and values (:mod:`jaxassoc.models.continuations`); rows with
    more than ``CONTINUATION_BUCKETS[-1]`` packed subwords are split over several rows. An encoder-decoder
    model gives the same arrays from its decoder (:mod:`jaxassoc.readouts.rpam_seq2seq`).
    """
    seq2seq = model.objective == "seq2seq"
    if model.decoder is None and not seq2seq:
        raise InputError(
            f"{model.name!r} is a {model.objective} model: RPAM needs a causal LM or an encoder-decoder model"
        )
    encode = encode_encoder_prompts if seq2seq else encode_prompts
    prompts = encode(model, [template.fill(t) for t in targets], add_bos=add_bos)
    longest = 0 if seq2seq else max(len(a) for a in attributes.token_ids)  # T5: attributes go to the decoder
    for target, ids in zip(targets, prompts):
        if len(ids) + longest > model.max_positions:
            raise InputError(
                f"target {target[:60]!r}: its prompt has {len(ids)} tokens, which with the longest attribute "
                f"({longest} tokens) exceeds the context of {model.max_positions} tokens of model {model.name!r}"
            )
    T, C = len(targets), len(attributes.words)
    needed = np.ones((T, C), dtype=bool) if needed is None else np.asarray(needed, dtype=bool)
    if needed.shape != (T, C):
        raise InputError(f"needed has shape {needed.shape}, not (targets, attributes) = {(T, C)}")
    multi = attributes.multi_token
    unique: dict[tuple[int, ...], int] = {}  # distinct prompt -> index
    where = [unique.setdefault(tuple(p), len(unique)) for p in prompts]
    wanted: list[dict[tuple[int, ...], None]] = [{} for _ in unique]  # ordered sets of continuations
    for t, c in zip(*np.nonzero(needed[:, list(multi)])) if multi else ():
        wanted[where[t]][attributes.token_ids[multi[c]]] = None
    first_ids = np.zeros(-(-C // ROW_MULTIPLE) * ROW_MULTIPLE, dtype=np.int32)
    first_ids[:C] = attributes.first_ids
    params = {**model.params, "rows": jnp.asarray(first_ids)}
    if seq2seq:
        first_logits, log_partition, factor, n_rows = seq2seq_factors(
            model,
            params,
            unique,
            [list(w) for w in wanted],
            C,
            batch_size=batch_size,
            mesh=mesh,
            progress=progress,
            buckets=buckets,
        )
    else:
        first_logits, log_partition, factor, n_rows = _causal_factors(
            model, params, unique, wanted, C, batch_size=batch_size, mesh=mesh, progress=progress, buckets=buckets
        )
    continuation = np.ones((T, C), dtype=np.float64)
    for c in multi:
        tokens = attributes.token_ids[c]
        continuation[:, c] = [factor.get((where[t], tokens), np.nan) for t in range(T)]
    return RpamInputs(
        first_logits[where], continuation.astype(np.float32), log_partition[where], len(multi), n_rows, len(factor)
    )


def _causal_factors(
    model: LanguageModel,
    params: dict,
    unique: dict,
    wanted: list,
    C: int,
    *,
    batch_size: int,
    mesh: Mesh | None,
    progress: bool,
    buckets: Sequence[int],
):
    """First-token logits ``(U, C)``, log-partitions ``(U,)`` and ``{(prompt, attribute ids): mean subword
    probability}`` of the distinct prompts, each run once with its continuations packed after it."""
    rows = _work_rows(list(unique), [list(w) for w in wanted], CONTINUATION_BUCKETS[-1])
    outs = _run_rows(model, params, rows, batch_size=batch_size, mesh=mesh, progress=progress, buckets=buckets)
    first_logits = np.empty((len(unique), C), dtype=np.float32)
    log_partition = np.empty(len(unique), dtype=np.float64)
    factor: dict[tuple[int, tuple[int, ...]], float] = {}  # (prompt, continuation) -> mean subword probability
    for (prompt, conts), (scores, lse, logprob) in zip(rows, outs):
        u = unique[prompt]
        first_logits[u], log_partition[u] = scores[:C], lse
        at = 0
        for tokens in conts:
            k = len(tokens)
            factor[u, tokens] = float(np.exp(logprob[at : at + k - 1].astype(np.float64)).mean())
            at += k - 1
    return first_logits, log_partition, factor, len(rows)


def cached_rpam_inputs(
    model: LanguageModel,
    targets: Sequence[str],
    attributes: Attributes,
    template: PromptTemplate,
    *,
    needed: np.ndarray | None = None,
    cache_dir: Path | None = None,
    add_bos: bool | None = None,
    batch_size: int = 32,
    mesh: Mesh | None = None,
    progress: bool = False,
    buckets: Sequence[int] = PROMPT_BUCKETS,
) -> RpamInputs:
    """:func:`rpam_inputs` through the on-disk cache (:mod:`jaxassoc.array_cache`; ``cache_dir=None``: off).

    The key holds what decides the arrays bit for bit: the model (weights, tokenizer, dtypes), the filled
    prompts, BOS, the attributes' token ids, the needed pairs, and the batching (batch size, buckets, devices). Statistics
    options and ``normalise`` are not in it, so the ablation and other statistics reuse the passes.
    """
    parts = {
        **model_key(model),
        "prompts": [template.fill(t) for t in targets],
        "add_bos": model.vocab.add_bos if add_bos is None else add_bos,
        "attribute_ids": [list(ids) for ids in attributes.token_ids],
        "needed": None if needed is None else [list(np.shape(needed)), np.packbits(needed).tobytes().hex()],
        # each scorer (full re-run, prefix pass + cached continuation pass, one pass) differs in the last bits;
        # encoder-decoder models are teacher-forced
        "scorer": "seq2seq_teacher_forced" if model.objective == "seq2seq" else "packed_continuations_one_pass",
        "batch_size": batch_size,
        "buckets": list(buckets),
        "devices": jax.device_count() if mesh is not None else 1,
        **({"mesh": dict(mesh.shape)} if mesh is not None else {}),  # fsdp/tp change the sums
    }

    def compute() -> dict[str, np.ndarray]:
        inputs = rpam_inputs(
            model,
            targets,
            attributes,
            template,
            needed=needed,
            add_bos=add_bos,
            batch_size=batch_size,
            mesh=mesh,
            progress=progress,
            buckets=buckets,
        )
        return {f.name: np.asarray(getattr(inputs, f.name)) for f in dataclasses.fields(RpamInputs)}

    arrays = cached_arrays(cache_dir, "rpam_inputs", parts, compute)
    return RpamInputs(
        arrays["first_logits"],
        arrays["continuation"],
        arrays["log_partition"],
        int(arrays["n_multi_token"]),
        int(arrays["n_sequences"]),
        int(arrays["n_continuations"]),
    )
