"""Greedy decoding of causal ports with a key/value cache.

Prompts are left-padded so that every row's last prompt token sits in the same column; one pass over the
prompts fills the cache, then each step runs one new token per row (``Decoder.forward_cached``) instead of
re-running the whole sequence. Decoding stops early once every row has produced a stop token.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from jaxassoc.errors import InputError, ModelError
from jaxassoc.models.base import Decoder, LanguageModel
from jaxassoc.models.batching import FINE_BUCKETS, model_limits, run_batched
from jaxassoc.models.heads import head_logits


@functools.partial(jax.jit, static_argnames=("decoder", "n_new"))
def greedy_tokens(
    params: dict,
    input_ids: Int[Array, "B P"],
    attention_mask: Int[Array, "B P"],
    *,
    decoder: Decoder,
    n_new: int,
    stop: Bool[Array, " V"],
) -> Int[Array, "B n_new"]:
    """The argmax continuation of each left-padded prompt: ``n_new`` token ids per row, -1 after the row's
    first stop token (which is kept)."""
    B, P = input_ids.shape
    mask = jnp.concatenate([attention_mask, jnp.ones((B, n_new), attention_mask.dtype)], axis=1)
    cache = decoder.init_cache(B, P + n_new, params["head"].W.dtype)
    hidden, cache = decoder.forward_cached(params["body"], input_ids, mask, cache, 0)
    token = jnp.argmax(head_logits(params["head"], hidden[:, -1]), axis=-1).astype(input_ids.dtype)
    new = jnp.full((B, n_new), -1, dtype=input_ids.dtype).at[:, 0].set(token)
    done = stop[token]

    def step(carry):
        i, token, cache, new, done = carry
        hidden, cache = decoder.forward_cached(params["body"], token[:, None], mask, cache, P + i - 1)
        token = jnp.argmax(head_logits(params["head"], hidden[:, 0]), axis=-1).astype(input_ids.dtype)
        new = new.at[:, i].set(jnp.where(done, -1, token))
        return i + 1, token, cache, new, done | stop[token]

    carry = (1, token, cache, new, done)
    return jax.lax.while_loop(lambda c: (c[0] < n_new) & ~jnp.all(c[4]), step, carry)[3]


def greedy_generate(
    model: LanguageModel,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stop: Bool[np.ndarray, " V"] | None = None,
    batch_size: int = 32,
    progress: bool = False,
) -> list[list[int]]:
    """Greedy new tokens of each prompt (token ids): at most ``max_new_tokens``, cut after the first token
    where ``stop`` is true (e.g. end-of-turn tokens)."""
    if model.decoder is None:
        raise ModelError(f"{model.name!r} is a {model.objective} model: greedy decoding needs a causal LM")
    if max_new_tokens < 1:
        raise InputError(f"max_new_tokens={max_new_tokens} must be at least 1")
    limits = model_limits(model)
    for i, prompt in enumerate(prompts):
        if len(prompt) + max_new_tokens > limits["max_length"]:
            raise InputError(
                f"prompt {i} has {len(prompt)} tokens: with max_new_tokens={max_new_tokens} it exceeds the "
                f"{limits['max_length']}-token context of {model.name!r}"
            )
    vocab = model.head.W.shape[0]
    stop = np.zeros(vocab, dtype=bool) if stop is None else np.asarray(stop, dtype=bool)
    if stop.shape != (vocab,):
        raise InputError(f"stop must be a boolean mask over the {vocab}-token vocabulary, not shape {stop.shape}")
    fn = functools.partial(greedy_tokens, decoder=model.decoder, n_new=max_new_tokens, stop=jnp.asarray(stop))
    outs = run_batched(
        fn,
        model.params,
        [list(p) for p in prompts],
        batch_size=batch_size,
        buckets=FINE_BUCKETS,
        padding_side="left",
        per_token=False,
        progress=progress,
        mesh=model.mesh,
        **{**limits, "max_length": limits["max_length"] - max_new_tokens},
    )
    return [[int(t) for t in out if t >= 0] for out in outs]
