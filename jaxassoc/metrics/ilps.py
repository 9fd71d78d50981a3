"""ILPS and ILPS* (Kurita et al. 2019; Cao et al. 2022, §3.1 and "Subwords"; docs/methods.md §3).

ILPS(g, t) = log P(t | template with group g) − log P(t | template with the prior noun), the prior noun
being the generic "person"/"people"/"People" as in the authors' code (not a masked group).

- Base ILPS scores only the trait's first subword, at the first of the trait's masks
  (``base_ilps.py``: the template holds one mask per subword, only the first is read).
- ILPS* (``mod_ilps.py``) uses the chain rule: subword i is scored at mask i, then written in before
  subword i + 1 is scored. The first subword's probability is renormalised by the total probability of
  word-initial tokens, later subwords' by the mass of continuation tokens — BPE (RoBERTa, GPT-2): word
  initial = starts with ``Ġ``; WordPiece (BERT): continuation = starts with ``##``, word initial = the rest.
- Causal LMs: the trait ends the prompt, and the logits predicting trait token i are read at the
  position before it (one teacher-forced pass gives all of them); the same kernels apply.

The kernels take logits or log-probabilities (both give the same values: the renormalisation and the
softmax cancel the same constant). The logits of one word are ``(S, V)``: one row per subword step,
padded to S with ``valid`` False. :func:`word_initial_mask` builds the vocabulary mask host-side from any
tokenizer with ``convert_ids_to_tokens``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ConfigError, InputError

MARKER_KINDS = {"bpe": "Ġ", "sentencepiece": "▁", "wordpiece": "##"}


def word_initial_mask(tokenizer: Any, marker_kind: str, vocab_size: int | None = None) -> np.ndarray:
    """Boolean ``(vocab_size,)`` mask of word-initial tokens, as the original code classifies them.

    ``marker_kind``: ``"bpe"`` (tokens starting with ``Ġ``), ``"sentencepiece"`` (``▁``) or
    ``"wordpiece"`` (every token not starting with ``##``, special tokens included). ``vocab_size``
    defaults to ``len(tokenizer)``; ids past the tokenizer's (a padded embedding matrix) are not
    word-initial.
    """
    if marker_kind not in MARKER_KINDS:
        raise ConfigError(f"word-initial marker kind {marker_kind!r} is unknown: use one of {sorted(MARKER_KINDS)}")
    n_tokens = len(tokenizer)
    vocab_size = n_tokens if vocab_size is None else vocab_size
    if vocab_size < n_tokens:
        raise InputError(f"vocab_size {vocab_size} is smaller than the tokenizer's {n_tokens} tokens")
    tokens = tokenizer.convert_ids_to_tokens(list(range(n_tokens)))
    marker = MARKER_KINDS[marker_kind]
    if marker_kind == "wordpiece":
        initial = [tok is not None and not tok.startswith(marker) for tok in tokens]
    else:
        initial = [tok is not None and tok.startswith(marker) for tok in tokens]
    mask = np.zeros(vocab_size, bool)
    mask[:n_tokens] = initial
    return mask


@jax.jit
def first_subword_logprob(logits: Float[Array, "*n V"], token: Int[Array, "*n"]) -> Float[Array, "*n"]:
    """log P(token) under softmax(logits) — base ILPS's term for one prompt."""
    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(logp, token[..., None], axis=-1)[..., 0]


@functools.partial(jax.jit, static_argnames=("renormalize",))
def chain_rule_logprob(
    logits: Float[Array, "*n S V"],
    tokens: Int[Array, "*n S"],
    valid: Bool[Array, "*n S"],
    word_initial: Bool[Array, " V"],
    renormalize: bool = True,
) -> Float[Array, "*n"]:
    """ILPS*'s log P(word): Σ_i log p_i(t_i) / Z_i over the valid subword steps.

    Z_0 = mass of word-initial tokens, Z_i = mass of the other tokens for i > 0 (``renormalize=True``,
    the original); Z_i = 1 otherwise (plain chain rule).
    """
    logits = logits.astype(jnp.float32)
    picked = jnp.take_along_axis(logits, tokens[..., None], axis=-1)[..., 0]
    if renormalize:
        step = jnp.arange(logits.shape[-2])
        allowed = jnp.where((step == 0)[:, None], word_initial[None, :], ~word_initial[None, :])
        norm = jax.nn.logsumexp(jnp.where(allowed, logits, -jnp.inf), axis=-1)
    else:
        norm = jax.nn.logsumexp(logits, axis=-1)
    return jnp.sum(jnp.where(valid, picked - norm, 0.0), axis=-1)


def ilps(group_logprob: Float[Array, "*n"], prior_logprob: Float[Array, "*n"]) -> Float[Array, "*n"]:
    """ILPS = log P(t | group) − log P(t | prior noun)."""
    return group_logprob - prior_logprob


def base_ilps(
    group_logits: Float[Array, "*n V"], prior_logits: Float[Array, "*n V"], first_token: Int[Array, "*n"]
) -> Float[Array, "*n"]:
    """Base ILPS from the logits at the trait's first mask in the group and the prior prompt."""
    return ilps(first_subword_logprob(group_logits, first_token), first_subword_logprob(prior_logits, first_token))


def ilps_star(
    group_logits: Float[Array, "*n S V"],
    prior_logits: Float[Array, "*n S V"],
    tokens: Int[Array, "*n S"],
    valid: Bool[Array, "*n S"],
    word_initial: Bool[Array, " V"],
    *,
    renormalize: bool = True,
) -> Float[Array, "*n"]:
    """ILPS*: the chain-rule log-probability of the whole trait, group prompt minus prior prompt."""
    if np.shape(word_initial) != (np.shape(group_logits)[-1],):
        raise InputError(
            f"ILPS*: the word-initial mask has shape {np.shape(word_initial)} but the logits have "
            f"{np.shape(group_logits)[-1]} vocabulary entries; build it with vocab_size=logits.shape[-1]"
        )
    if not bool(np.asarray(valid)[..., 0].all()):
        raise InputError("ILPS*: every trait needs at least one subword (valid[..., 0] must be True)")
    score = functools.partial(chain_rule_logprob, word_initial=word_initial, renormalize=renormalize)
    return ilps(score(group_logits, tokens, valid), score(prior_logits, tokens, valid))
