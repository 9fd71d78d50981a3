"""Self-Debias at scoring time (Schick, Udupa & Schütze 2021, TACL 9, "Self-Diagnosis and Self-Debiasing: A
Proposal for Reducing Corpus-Based Bias in NLP", §3 and Eq. 2; docs/methods.md §11.7).

Besides the plain pass over an input x, the model reads x after a *debiasing prefix* per bias type y_i, a
text announcing that what follows is biased; the tokens that prefix makes more likely are taken for biased
ones and scaled down. With p = p(w | x) and p_i = p(w | prefix_i, x) over the vocabulary:

    alpha(w) = max(0, max_i p_i(w) - p(w))                  (Eq. 2's Δ, all bias types at once)
    p'(w)   ∝ p(w) · max(exp(-decay · alpha(w)), epsilon)    (decay = λ = 50, epsilon = 0.01 as the paper)

renormalised over the vocabulary; everything here returns log p'. ``decay = 0`` (or ``epsilon >= 1``) gives the
plain distribution back.

Layout. The prefix and the input are tokenised separately and concatenated, the prefix after the input's
first token (its start token: the BOS / EOS a causal sentence score conditions on,
``readouts.sentence_scores.start_token``; ``[CLS]`` for a masked LM), so the input's own tokens are the same
ids in every row. The plain row and one row per prefix run in ONE forward pass (one jitted function):

- causal LM: rows right-aligned (left padding), so each input token sits in the same column in every row and
  the column predicting token t+1 is the same for all; position ids and attention come from the mask
  (``models.masks``), so the plain row's result equals running it alone;
- masked LM: rows left-aligned (right padding) after ``[CLS]``; the masked position moves by the prefix's
  length, read per row.

Compiled once per (model config, batch shape, number and padded length of prefixes): the prefixes' ids,
``decay`` and ``epsilon`` are traced arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxassoc.errors import ConfigError, InputError, ModelError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import FINE_BUCKETS, model_limits, run_batched
from jaxassoc.models.heads import head_logits
from jaxassoc.readouts.sentence_scores import masked_copies

BIAS_TYPES = ("gender", "race", "religion")
"""The bias types with a prefix of ours; ``"all"`` takes the three together."""

ALIASES = {"race-color": "race"}
"""Other names of a bias type (CrowS-Pairs' ``race-color``)."""

DEFAULT_PREFIXES = {
    "gender": "Here is a sexist text, full of prejudice and stereotypes about women and men:\n",
    "race": "Here is a racist text, full of prejudice and stereotypes about people of other races and skin colours:\n",
    "religion": "Here is a bigoted text, full of prejudice and stereotypes about people of other religions:\n",
}
"""Our debiasing prefixes (the paper's idea, our wording: docs/methods.md §11.7): each
names the bias and announces the text after it as an instance of it, and ends with a newline, so the input
starts as at the start of a line, tokenised as in the plain pass."""

DECAY = 50.0
"""λ of the decay function (Schick et al. 2021, §3: λ = 50)."""
EPSILON = 0.01
"""The floor of the scaling factor (the authors' implementation: 0.01), so no token's probability goes to 0."""


def prefixes_for(bias_type: str | Sequence[str] = "all") -> tuple[str, ...]:
    """The prefixes of one bias type, several, or ``"all"`` (:data:`BIAS_TYPES`; :data:`ALIASES` too).
    ConfigError naming an unknown one and listing the choices."""
    names = [bias_type] if isinstance(bias_type, str) else list(bias_type)
    out = []
    for name in names:
        if name == "all":
            out += [DEFAULT_PREFIXES[b] for b in BIAS_TYPES]
            continue
        key = ALIASES.get(name, name)
        if key not in DEFAULT_PREFIXES:
            raise ConfigError(
                f"self-debias bias type {name!r} is unknown: choose one of {', '.join(BIAS_TYPES)}, 'all' "
                f"(aliases: {', '.join(f'{a} = {b}' for a, b in ALIASES.items())}), or pass prefixes=[...] texts"
            )
        out.append(DEFAULT_PREFIXES[key])
    if not out:
        raise ConfigError("self-debias needs at least one bias type: choose from " + ", ".join(BIAS_TYPES))
    return tuple(dict.fromkeys(out))


def _check_model(model: LanguageModel) -> None:
    if model.objective not in ("causal", "masked"):
        raise ModelError(
            f"self-debias scores a causal or masked LM; {model.name!r} is an encoder-decoder ({model.family}) "
            f"model ({model.objective}), which it does not support"
        )
    if model.objective == "masked" and model.vocab.mask_id is None:
        raise ModelError(f"self-debias of a masked LM needs its mask token; {model.name!r} has none")


def _check_options(decay: float, epsilon: float) -> None:
    if not np.isfinite(decay) or decay < 0:
        raise ConfigError(f"self-debias decay={decay!r} must be a finite number >= 0 (the paper's λ; default 50)")
    if not 0 <= epsilon <= 1:
        raise ConfigError(f"self-debias epsilon={epsilon!r} must lie in [0, 1] (the scaling floor; default 0.01)")


def prefix_arrays(model: LanguageModel, prefixes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, lengths)``: each prefix's tokens (no special tokens) as an int32 ``(K, P)`` array padded on the
    right, ``P`` the longest, and their ``(K,)`` lengths. ConfigError for no prefix or one without tokens."""
    if isinstance(prefixes, str):
        prefixes = [prefixes]
    if len(prefixes) == 0:
        raise ConfigError("self-debias needs at least one prefix: pass prefixes=[...] or a bias type")
    encoded = model.tokenizer(list(prefixes), add_special_tokens=False)["input_ids"]
    for text, ids in zip(prefixes, encoded):
        if not ids:
            raise ConfigError(f"self-debias prefix {text!r} has no tokens for {model.name!r}: give it some text")
    P = max(len(e) for e in encoded)
    ids = np.full((len(encoded), P), model_limits(model)["pad_id"], np.int32)
    for row, seq in enumerate(encoded):
        ids[row, : len(seq)] = seq
    return ids, np.array([len(e) for e in encoded], np.int32)


def _check_context(model: LanguageModel, prefixes: Sequence[str], lengths: Sequence[int], P_lens) -> None:
    """ConfigError naming the first input that, after the longest prefix, is longer than the model's context."""
    k = int(np.max(P_lens))
    longest = list(prefixes)[int(np.argmax(P_lens))]
    for i, n in enumerate(lengths):
        if n + k > model.max_positions:
            raise ConfigError(
                f"self-debias: input {i} has {n} tokens, and the prefix {longest!r} adds {k}: {n + k} tokens, more "
                f"than the {model.max_positions}-token context of {model.name!r}; shorten the prefix or the input"
            )


# --- the formula ---------------------------------------------------------------------------------------------


def debias(plain: Float[Array, "... V"], prefixed: Float[Array, "K ... V"], decay, epsilon) -> Float[Array, "... V"]:
    """Self-Debias's reweighting (Schick et al. 2021, Eq. 2, all prefixes at once) on log-probabilities:
    ``plain`` log p, ``prefixed`` the K log p_i; returns log p' with p' ∝ p · max(exp(-decay · alpha), epsilon),
    alpha = max(0, max_i p_i - p). The floor is taken in log space, max(-decay · alpha, log epsilon), which is
    exact and keeps p' > 0 where exp(-decay · alpha) would underflow."""
    p = jnp.exp(plain)
    alpha = jnp.maximum(jnp.exp(prefixed).max(axis=0) - p, 0.0)
    log_scale = jnp.maximum(-decay * alpha, jnp.log(epsilon))
    logq = plain + log_scale
    return logq - jax.nn.logsumexp(logq, axis=-1, keepdims=True)


def _log_softmax(head, hidden: Float[Array, "... D"]) -> Float[Array, "... V"]:
    return jax.nn.log_softmax(head_logits(head, hidden).astype(jnp.float32), axis=-1)


# --- causal LMs ----------------------------------------------------------------------------------------------


def _causal_rows(ids, mask, prefix_ids, prefix_lens, pad_id):
    """The plain rows and one row per prefix, right-aligned in ``L = T + P`` columns: ``((1+K)·B, L)`` ids and
    0/1 mask, and the plain inputs right-aligned in T columns with their shift (for mapping outputs back).

    ``ids``/``mask`` (B, T): one contiguous run of real tokens per row (either padding side)."""
    B, T = ids.shape
    K, P = prefix_ids.shape
    L = T + P
    real = mask > 0
    n = real.sum(1)
    first = jnp.argmax(real, axis=1)
    shift = T - first - n  # right-align: column c takes column c - shift
    cols = jnp.arange(T)
    src = jnp.clip(cols[None] - shift[:, None], 0, T - 1)
    aligned = jnp.where(cols[None] >= T - n[:, None], jnp.take_along_axis(ids, src, axis=1), pad_id)
    plain = jnp.pad(aligned, ((0, 0), (P, 0)), constant_values=pad_id)
    plain_mask = jnp.pad((cols[None] >= T - n[:, None]).astype(jnp.int32), ((0, 0), (P, 0)))
    # prefixed row i of input b: [first token, prefix_i (k_i tokens), the other n - 1 tokens], ending at column L-1
    k = prefix_lens[:, None, None]
    q = jnp.arange(L)[None, None] - (L - n[None, :, None] - k)  # (K, B, L): index in the prefixed sequence
    from_input = jnp.clip(T - n[None, :, None] + jnp.where(q > k, q - k, 0), 0, T - 1)
    input_tok = jnp.take_along_axis(jnp.broadcast_to(aligned, (K, B, T)), from_input, axis=2)
    prefix_tok = jnp.take_along_axis(jnp.broadcast_to(prefix_ids[:, None], (K, B, P)), jnp.clip(q - 1, 0, P - 1), 2)
    rows = jnp.where(q < 0, pad_id, jnp.where((q >= 1) & (q <= k), prefix_tok, input_tok))
    all_ids = jnp.concatenate([plain[None], rows]).reshape((1 + K) * B, L)
    all_mask = jnp.concatenate([plain_mask[None], (q >= 0).astype(jnp.int32)]).reshape((1 + K) * B, L)
    return all_ids, all_mask, aligned, shift


@functools.partial(jax.jit, static_argnames=("forward", "pad_id"))
def causal_log_probs(
    params,
    ids: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    prefix_ids: Int[Array, "K P"],
    prefix_lens: Int[Array, " K"],
    decay: Float[Array, ""],
    epsilon: Float[Array, ""],
    *,
    forward,
    pad_id: int,
) -> Float[Array, "B T V"]:
    """Column t: the debiased log p'(next token | the input's tokens up to t) over the vocabulary (module
    docstring), in the input's own columns; padding columns hold the plain row's (meaningless) values.
    ``ids``/``mask``: one contiguous run of real tokens per row, starting with the start token; ``forward``
    (static: ``model.forward``) keeps one compilation per model config and shape."""
    B, T = ids.shape
    K, P = prefix_ids.shape
    all_ids, all_mask, _, shift = _causal_rows(ids, mask, prefix_ids, prefix_lens, pad_id)
    hidden = forward(params["body"], all_ids, all_mask).hidden.reshape(1 + K, B, T + P, -1)[:, :, P:]
    logp = _log_softmax(params["head"], hidden)
    out = debias(logp[0], logp[1:], decay, epsilon)  # (B, T, V), right-aligned
    back = jnp.clip(jnp.arange(T)[None] + shift[:, None], 0, T - 1)  # input column c sits at c + shift
    return jnp.take_along_axis(out, back[:, :, None], axis=1)


@functools.partial(jax.jit, static_argnames=("forward", "pad_id"))
def causal_token_logprobs(
    params,
    ids: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    prefix_ids: Int[Array, "K P"],
    prefix_lens: Int[Array, " K"],
    decay: Float[Array, ""],
    epsilon: Float[Array, ""],
    *,
    forward,
    pad_id: int,
) -> Float[Array, "B T"]:
    """Column t: the debiased log p'(token t+1 | tokens up to t) (float32), 0 at a row's last token and on
    padding: ``readouts.sentence_scores.causal_token_logprobs`` under Self-Debias. The vocabulary-wide
    arrays are made one input at a time (``lax.map``), never ``(B, T, V)`` at once."""
    B, T = ids.shape
    K, P = prefix_ids.shape
    all_ids, all_mask, aligned, shift = _causal_rows(ids, mask, prefix_ids, prefix_lens, pad_id)
    hidden = forward(params["body"], all_ids, all_mask).hidden.reshape(1 + K, B, T + P, -1)[:, :, P:]
    targets = jnp.pad(aligned[:, 1:], ((0, 0), (0, 1)))

    def one(args):
        h, target = args  # (1+K, T, D), (T,)
        logp = _log_softmax(params["head"], h)
        return jnp.take_along_axis(debias(logp[0], logp[1:], decay, epsilon), target[:, None], axis=1)[:, 0]

    picked = jax.lax.map(one, (jnp.moveaxis(hidden, 1, 0), targets))  # (B, T), right-aligned
    n = (mask > 0).sum(1)
    cols = jnp.arange(T)[None]
    picked = jnp.where((cols >= T - n[:, None]) & (cols < T - 1), picked, 0.0)
    back = jnp.clip(cols + shift[:, None], 0, T - 1)
    return jnp.where(mask > 0, jnp.take_along_axis(picked, back, axis=1), 0.0)


# --- masked LMs ----------------------------------------------------------------------------------------------


def _masked_rows(ids, mask, prefix_ids, prefix_lens, pad_id, mask_id):
    """Plain rows and one row per prefix after the first token, left-aligned in ``T + P`` columns, and each
    row's masked column: ``((1+K)·B, T+P)`` ids and mask, ``(1+K, B)`` positions."""
    B, T = ids.shape
    K, P = prefix_ids.shape
    L = T + P
    real = mask > 0
    n = real.sum(1)
    first = jnp.argmax(real, axis=1)
    c = jnp.arange(L)[None]
    src = jnp.clip(c + first[:, None], 0, T - 1)
    plain = jnp.where(c < n[:, None], jnp.take_along_axis(jnp.pad(ids, ((0, 0), (0, P))), src, axis=1), pad_id)
    plain_mask = (c < n[:, None]).astype(jnp.int32)
    k = prefix_lens[:, None, None]
    q = c[None]  # (1, 1, L)
    from_input = jnp.clip(first[None, :, None] + jnp.where(q > k, q - k, 0), 0, T - 1)
    input_tok = jnp.take_along_axis(jnp.broadcast_to(ids, (K, B, T)), from_input, axis=2)
    prefix_tok = jnp.take_along_axis(jnp.broadcast_to(prefix_ids[:, None], (K, B, P)), jnp.clip(q - 1, 0, P - 1) +
                                     jnp.zeros((K, B, 1), jnp.int32), 2)  # fmt: skip
    inside = q < n[None, :, None] + k
    rows = jnp.where(inside, jnp.where((q >= 1) & (q <= k), prefix_tok, input_tok), pad_id)
    all_ids = jnp.concatenate([plain[None], rows]).reshape((1 + K) * B, L)
    all_mask = jnp.concatenate([plain_mask[None], jnp.broadcast_to(inside, (K, B, L)).astype(jnp.int32)])
    position = jnp.argmax(plain == mask_id, axis=1)  # (B,)
    positions = jnp.concatenate([position[None], position[None] + prefix_lens[:, None]])  # (1+K, B)
    return all_ids, all_mask.reshape((1 + K) * B, L), positions, first


@functools.partial(jax.jit, static_argnames=("forward", "pad_id", "mask_id"))
def masked_log_probs(
    params,
    ids: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    prefix_ids: Int[Array, "K P"],
    prefix_lens: Int[Array, " K"],
    decay: Float[Array, ""],
    epsilon: Float[Array, ""],
    *,
    forward,
    pad_id: int,
    mask_id: int,
) -> Float[Array, "B V"]:
    """The debiased log p'(w | the input) at each row's one mask token, over the vocabulary (float32). ``ids``:
    one contiguous run of real tokens per row, starting with ``[CLS]`` (the prefix goes after it)."""
    B, T = ids.shape
    K, P = prefix_ids.shape
    all_ids, all_mask, positions, _ = _masked_rows(ids, mask, prefix_ids, prefix_lens, pad_id, mask_id)
    hidden = forward(params["body"], all_ids, all_mask).hidden.reshape(1 + K, B, T + P, -1)
    at = jnp.take_along_axis(hidden, positions[:, :, None, None], axis=2)[:, :, 0]  # (1+K, B, D)
    logp = _log_softmax(params["head"], at)
    return debias(logp[0], logp[1:], decay, epsilon)


@functools.partial(jax.jit, static_argnames=("forward", "pad_id", "mask_id"))
def masked_token_logprobs(
    params,
    ids: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    hidden_ids: Int[Array, "B T"],
    prefix_ids: Int[Array, "K P"],
    prefix_lens: Int[Array, " K"],
    decay: Float[Array, ""],
    epsilon: Float[Array, ""],
    *,
    forward,
    pad_id: int,
    mask_id: int,
) -> Float[Array, " B"]:
    """The debiased log p'(the token of ``hidden_ids`` at the mask | ``ids``) per row (float32):
    ``readouts.sentence_scores.masked_token_logprobs`` under Self-Debias."""
    logp = masked_log_probs(
        params, ids, mask, prefix_ids, prefix_lens, decay, epsilon, forward=forward, pad_id=pad_id, mask_id=mask_id
    )
    position = jnp.argmax(ids == mask_id, axis=1)
    target = jnp.take_along_axis(hidden_ids, position[:, None], axis=1)
    return jnp.take_along_axis(logp, target, axis=1)[:, 0]


# --- the user-facing functions -------------------------------------------------------------------------------


def _setup(model, prefixes, bias_type, decay, epsilon):
    _check_model(model)
    _check_options(decay, epsilon)
    texts = prefixes_for(bias_type) if prefixes is None else ([prefixes] if isinstance(prefixes, str) else prefixes)
    p_ids, p_lens = prefix_arrays(model, texts)
    traced = dict(
        prefix_ids=jnp.asarray(p_ids),
        prefix_lens=jnp.asarray(p_lens),
        decay=jnp.float32(decay),
        epsilon=jnp.float32(epsilon),
    )
    return texts, p_lens, traced


def _host_rows(ids, mask) -> tuple[np.ndarray, np.ndarray, list[list[int]]]:
    ids, mask = np.asarray(ids), np.asarray(mask)
    if ids.ndim != 2 or ids.shape != mask.shape:
        raise InputError(f"self-debias takes (B, T) ids and mask of one shape; got {ids.shape} and {mask.shape}")
    rows = []
    for b in range(ids.shape[0]):
        where = np.flatnonzero(mask[b])
        if len(where) == 0 or where[-1] - where[0] + 1 != len(where) or set(np.unique(mask[b])) - {0, 1}:
            raise InputError(
                f"self-debias: row {b} of the mask must be one contiguous run of 1s (one input per row, padding "
                f"on either side); got {mask[b].tolist()}"
            )
        rows.append(ids[b, where].tolist())
    return ids, mask, rows


def _check_first(model: LanguageModel, rows: list[list[int]]) -> None:
    """InputError for a row that does not start with the token the prefix goes after."""
    if model.objective == "causal":
        from jaxassoc.readouts.sentence_scores import start_token

        first, name = start_token(model, eos_fallback=True, what="self-debias"), "start token (BOS, else EOS)"
    else:
        first, name = model.tokenizer.cls_token_id, "[CLS] token"
    if first is None:
        return
    for b, row in enumerate(rows):
        if row[0] != first:
            raise InputError(
                f"self-debias: row {b} starts with token {row[0]}, not the model's {name} {first}: the prefix goes "
                f"after it; tokenise with jaxassoc.models.interventions.tokenize"
            )


def self_debias_log_probs(
    model: LanguageModel,
    ids: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    *,
    prefixes: Sequence[str] | None = None,
    bias_type: str | Sequence[str] = "all",
    decay: float = DECAY,
    epsilon: float = EPSILON,
) -> Float[Array, "B T V"]:
    """The debiased next-token log-probabilities of a causal LM at every position of the plain input
    (Schick et al. 2021, Eq. 2; module docstring): column t holds log p'(w | tokens ≤ t) for every w.

    ``ids``/``mask`` (B, T) as :func:`jaxassoc.models.interventions.tokenize` gives them (the start token first;
    padding on either side); ``prefixes``: texts (default: :func:`prefixes_for` ``bias_type``). The plain and
    prefixed rows run in one jitted pass. Padding columns are meaningless. ConfigError for an unknown bias type,
    a bad option, or a prefix taking an input past the context; ModelError for a model that is not causal
    (masked LMs: :func:`self_debias_masked_log_probs`)."""
    _check_model(model)
    if model.objective != "causal":
        raise ModelError(
            f"self_debias_log_probs is for causal LMs; {model.name!r} is {model.objective}: use "
            "self_debias_masked_log_probs (one mask per row)"
        )
    texts, p_lens, traced = _setup(model, prefixes, bias_type, decay, epsilon)
    ids, mask, rows = _host_rows(ids, mask)
    _check_first(model, rows)
    _check_context(model, texts, [len(r) for r in rows], p_lens)
    return causal_log_probs(
        model.params, jnp.asarray(ids), jnp.asarray(mask), **traced, forward=model.forward,
        pad_id=model_limits(model)["pad_id"],
    )  # fmt: skip


def self_debias_masked_log_probs(
    model: LanguageModel,
    ids: Int[Array, "B T"],
    mask: Int[Array, "B T"],
    *,
    prefixes: Sequence[str] | None = None,
    bias_type: str | Sequence[str] = "all",
    decay: float = DECAY,
    epsilon: float = EPSILON,
) -> Float[Array, "B V"]:
    """The debiased log p'(w | input) of a masked LM at each row's one mask token (the prefix goes after
    ``[CLS]``; module docstring). InputError for a row without exactly one mask; otherwise as
    :func:`self_debias_log_probs`."""
    _check_model(model)
    if model.objective != "masked":
        raise ModelError(f"self_debias_masked_log_probs is for masked LMs; {model.name!r} is {model.objective}")
    texts, p_lens, traced = _setup(model, prefixes, bias_type, decay, epsilon)
    ids, mask, rows = _host_rows(ids, mask)
    _check_first(model, rows)
    for b, row in enumerate(rows):
        if row.count(model.vocab.mask_id) != 1:
            raise InputError(f"self-debias: row {b} holds {row.count(model.vocab.mask_id)} mask tokens; give one")
    _check_context(model, texts, [len(r) for r in rows], p_lens)
    return masked_log_probs(
        model.params, jnp.asarray(ids), jnp.asarray(mask), **traced, forward=model.forward,
        pad_id=model_limits(model)["pad_id"], mask_id=int(model.vocab.mask_id),
    )  # fmt: skip


def _batched_limits(model: LanguageModel, p_lens) -> dict:
    limits = model_limits(model)
    return {**limits, "max_length": model.max_positions - int(np.max(p_lens))}


def self_debias_causal_token_rows(
    model: LanguageModel,
    sequences: list[list[int]],
    *,
    prefixes: Sequence[str] | None = None,
    bias_type: str | Sequence[str] = "all",
    decay: float = DECAY,
    epsilon: float = EPSILON,
    batch_size: int = 16,
    progress: bool = False,
) -> list[np.ndarray]:
    """Per sequence (its start token first: ``readouts.sentence_scores.causal_token_ids``), float32 debiased
    log p'(token t+1 | tokens up to t) at column t (0 in its last column): ``sentence_scores.causal_token_rows``
    under Self-Debias. ``batch_size`` inputs per pass, each with its 1 + K rows; one compilation per length
    bucket."""
    _check_model(model)
    if model.objective != "causal":
        raise ModelError(f"self-debias causal scoring needs a causal LM; {model.name!r} is {model.objective}")
    texts, p_lens, traced = _setup(model, prefixes, bias_type, decay, epsilon)
    _check_first(model, [list(s) for s in sequences])
    _check_context(model, texts, [len(s) for s in sequences], p_lens)
    limits = _batched_limits(model, p_lens)
    fn = functools.partial(causal_token_logprobs, **traced, forward=model.forward, pad_id=limits["pad_id"])
    return run_batched(
        fn, model.params, [list(s) for s in sequences], batch_size=batch_size, buckets=FINE_BUCKETS,
        progress=progress, mesh=model.mesh, **limits,
    )  # fmt: skip


def self_debias_causal_log_likelihoods(model: LanguageModel, sequences: list[list[int]], **options) -> np.ndarray:
    """float64 sum of the debiased log p'(token | earlier tokens) over each sequence's tokens after its first:
    ``readouts.sentence_scores.causal_log_likelihoods`` under Self-Debias (options: :func:`self_debias_causal_token_rows`)."""
    rows = self_debias_causal_token_rows(model, sequences, **options)
    return np.array([row.astype(np.float64).sum() for row in rows])


def self_debias_masked_logprobs(
    model: LanguageModel,
    masked: list[list[int]],
    filled: list[list[int]],
    *,
    prefixes: Sequence[str] | None = None,
    bias_type: str | Sequence[str] = "all",
    decay: float = DECAY,
    epsilon: float = EPSILON,
    batch_size: int = 16,
    progress: bool = False,
) -> np.ndarray:
    """float32 debiased log p'(the token of ``filled`` at the mask | ``masked``), one per sequence; each
    ``masked`` sequence (``[CLS]`` first) holds one mask and equals its ``filled`` sequence elsewhere:
    ``readouts.sentence_scores.masked_logprobs`` under Self-Debias."""
    _check_model(model)
    if model.objective != "masked":
        raise ModelError(f"self-debias masked scoring needs a masked LM; {model.name!r} is {model.objective}")
    texts, p_lens, traced = _setup(model, prefixes, bias_type, decay, epsilon)
    mask_id = int(model.vocab.mask_id)
    _check_first(model, [list(s) for s in masked])
    for i, seq in enumerate(masked):
        if list(seq).count(mask_id) != 1:
            raise InputError(f"self-debias: sequence {i} holds {list(seq).count(mask_id)} mask tokens; give one")
    _check_context(model, texts, [len(s) for s in masked], p_lens)
    limits = _batched_limits(model, p_lens)
    fn = functools.partial(
        masked_token_logprobs, **traced, forward=model.forward, pad_id=limits["pad_id"], mask_id=mask_id
    )
    out = run_batched(
        fn, model.params, [list(s) for s in masked], aligned=[list(s) for s in filled], batch_size=batch_size,
        buckets=FINE_BUCKETS, per_token=False, progress=progress, mesh=model.mesh, **limits,
    )  # fmt: skip
    return np.array([float(o) for o in out], np.float32)


def self_debias_pseudo_log_likelihoods(
    model: LanguageModel,
    sequences: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    **options,
) -> list[np.ndarray]:
    """For each sequence (with its special tokens) the float32 debiased log p' of its token at each of
    ``positions`` when that one token is masked: ``readouts.sentence_scores.pseudo_log_likelihoods`` under
    Self-Debias (identical masked copies run once; options: :func:`self_debias_masked_logprobs`)."""
    _check_model(model)
    if model.objective != "masked":
        raise ModelError(f"self-debias pseudo-log-likelihoods need a masked LM; {model.name!r} is {model.objective}")
    masked, originals, slots = masked_copies(sequences, positions, int(model.vocab.mask_id))
    logp = self_debias_masked_logprobs(model, masked, originals, **options)
    return [logp[row] for row in slots]


def self_debias_sentence_log_prob(
    model: LanguageModel,
    texts: Sequence[str],
    bias_type: str | Sequence[str] = "all",
    *,
    prefixes: Sequence[str] | None = None,
    decay: float = DECAY,
    epsilon: float = EPSILON,
    batch_size: int = 16,
) -> np.ndarray:
    """float64 debiased score of each sentence, by the project's convention for its objective:

    - causal LM: log P'(sentence | start token) = sum over its tokens of log p'(token | start token and the
      earlier tokens), as CrowS-Pairs scores a causal model (``readouts.crows_pairs``);
    - masked LM: the pseudo-log-likelihood of every token between ``[CLS]`` and ``[SEP]``, each masked in
      turn (Salazar et al. 2020; CrowS-Pairs masks only the tokens a pair shares:
      :func:`self_debias_pseudo_log_likelihoods` with its positions).

    ``bias_type``: one of :data:`BIAS_TYPES`, ``"all"`` or several (ignored when ``prefixes`` is given)."""
    from jaxassoc.readouts.sentence_scores import causal_token_ids, start_token

    _check_model(model)
    options = dict(prefixes=prefixes, bias_type=bias_type, decay=decay, epsilon=epsilon, batch_size=batch_size)
    if model.objective == "causal":
        start = start_token(model, eos_fallback=True, what="self-debias")
        return self_debias_causal_log_likelihoods(model, causal_token_ids(model, list(texts), start), **options)
    sequences = model.tokenizer(list(texts))["input_ids"]
    for i, seq in enumerate(sequences):
        if len(seq) <= 2:
            raise InputError(f"sentence {i} ({texts[i]!r}) has no tokens: every sentence needs text")
    per_token = self_debias_pseudo_log_likelihoods(
        model, sequences, [range(1, len(s) - 1) for s in sequences], **options
    )
    return np.array([p.astype(np.float64).sum() for p in per_token])


__all__ = [
    "ALIASES",
    "BIAS_TYPES",
    "DECAY",
    "DEFAULT_PREFIXES",
    "EPSILON",
    "causal_log_probs",
    "causal_token_logprobs",
    "debias",
    "masked_log_probs",
    "masked_token_logprobs",
    "prefix_arrays",
    "prefixes_for",
    "self_debias_causal_log_likelihoods",
    "self_debias_causal_token_rows",
    "self_debias_log_probs",
    "self_debias_masked_log_probs",
    "self_debias_masked_logprobs",
    "self_debias_pseudo_log_likelihoods",
    "self_debias_sentence_log_prob",
]


class SelfDebias(NamedTuple):
    """Self-Debias as a model's scoring transform (``model.with_scoring(SelfDebias("gender"))``): every token
    probability ``readouts.sentence_scores`` scores sentences with (CrowS-Pairs, StereoSet, UnStereoEval, the
    LM cost) is the debiased p' of :func:`debias`. ``bias_type``: as :func:`prefixes_for`."""

    bias_type: str = "all"
    decay: float = DECAY
    epsilon: float = EPSILON
    batch_size: int = 16

    def causal_token_rows(self, model: LanguageModel, sequences: list[list[int]], progress: bool = False) -> list:
        return self_debias_causal_token_rows(model, sequences, **self._options(), progress=progress)

    def masked_logprobs(self, model: LanguageModel, masked: list, filled: list, progress: bool = False) -> np.ndarray:
        return self_debias_masked_logprobs(model, masked, filled, **self._options(), progress=progress)

    def reserved(self, model: LanguageModel) -> int:
        """The context the prefixes take: an input may hold ``model.max_positions`` minus this many tokens."""
        return int(prefix_arrays(model, prefixes_for(self.bias_type))[1].max())

    def identity(self) -> dict:
        """What the scores depend on, for the model's fingerprint: the prefixes' texts, λ and ε."""
        return {"self_debias": list(prefixes_for(self.bias_type)), "decay": self.decay, "epsilon": self.epsilon}

    def _options(self) -> dict:
        _check_options(self.decay, self.epsilon)
        return {
            "bias_type": self.bias_type,
            "decay": self.decay,
            "epsilon": self.epsilon,
            "batch_size": self.batch_size,
        }
