"""RPAM's readout for an encoder-decoder model (T5; Hodel et al. 2026, App. G and E; docs/methods.md, RPAM
with T5): the filled prompt, ended by EOS as T5's tokenizer encodes it, goes to the encoder; the decoder
starts from ``decoder_start_token_id`` alone, and its first step gives every attribute's first-token logit
and the log-partition; subwords 2..k of a multi-token attribute are read teacher-forced at the following
decoder steps, each over the full vocabulary. No sentinel (``<extra_id_0>``) is put in the prompt or the
decoder input.

Each work row is (prompt, decoder sequence): ``[start]`` for a prompt whose multi-token attributes the task
does not need, else ``[start, a_1, ..., a_k]`` per needed multi-token attribute (every row of a prompt reads
the same first step). Rows run in batches of one fixed size, encoder and decoder right-padded to buckets.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.batching import bucket_length, check_sequences, model_limits, pad_batch
from jaxassoc.models.heads import head_logits, next_token_logprobs
from jaxassoc.models.interventions import run_decoder, run_parts
from jaxassoc.models.multihost import Feeder, in_batches

DECODER_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def encode_encoder_prompts(model: LanguageModel, prompts: Sequence[str], *, add_bos: bool | None) -> list[list[int]]:
    """Each prompt's encoder ids: its tokens, then EOS (what T5's tokenizer gives by default)."""
    if add_bos:
        raise InputError(
            f"model.add_bos=true but {model.name!r} is an encoder-decoder model: its encoder input "
            "gets no BOS (it ends with EOS); drop model.add_bos"
        )
    if model.vocab.eos_id is None:
        raise InputError(f"encoder-decoder model {model.name!r} has no EOS token to end its encoder input")
    return [model.tokenizer(p, add_special_tokens=False)["input_ids"] + [model.vocab.eos_id] for p in prompts]


@functools.partial(jax.jit, static_argnames=("family", "config"))
def _scores(params, enc_ids, enc_mask, dec_ids, dec_mask, *, family, config):
    """The first decoder step's logits of the rows ``params["rows"]`` and its log-partition, and
    ``log p(dec[t+1] | dec[<=t], prompt)`` at every decoder step (0 past the row's tokens)."""
    encoded = run_parts(family, params["body"], enc_ids, enc_mask, config=config).hidden
    hidden = run_decoder(family, params["body"], encoded, enc_mask, dec_ids, dec_mask, config=config).hidden
    first = head_logits(params["head"], hidden[:, 0]).astype(jnp.float32)
    steps = next_token_logprobs(params["head"], hidden, dec_ids, dec_mask) if dec_ids.shape[1] > 1 else None
    return first[:, params["rows"]], jax.nn.logsumexp(first, axis=-1), steps


def run_rows(
    model: LanguageModel,
    params: dict,
    rows: list[tuple[tuple[int, ...], tuple[int, ...]]],
    *,
    batch_size: int,
    mesh: Mesh | None,
    progress: bool,
    buckets: Sequence[int],
) -> list:
    """:func:`_scores` over ``(encoder ids, decoder ids)`` rows; one ``(scores, lse, steps)`` per row, in order."""
    limits = model_limits(model)
    check_sequences([list(p) for p, _ in rows], limits["max_length"], limits["vocab_size"])
    check_sequences([list(d) for _, d in rows], None, limits["vocab_size"])
    feed = Feeder(params, mesh)
    B = feed.rows(min(batch_size, 1 << (len(rows) - 1).bit_length()))
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i][1]), len(rows[i][0])))
    fn = functools.partial(_scores, family=model.port, config=model.config)
    results: list = [None] * len(rows)
    for group in in_batches([order[i : i + B] for i in range(0, len(order), B)], progress):
        P = bucket_length(max(len(rows[i][0]) for i in group), buckets, limits["max_length"])
        L = bucket_length(max(len(rows[i][1]) for i in group), DECODER_BUCKETS, None)
        enc = pad_batch([list(rows[i][0]) for i in group], P, B, limits["pad_id"], "right")
        dec = pad_batch([list(rows[i][1]) for i in group], L, B, limits["pad_id"], "right")
        out = feed(fn, *enc, *dec)
        for r, i in enumerate(group):
            results[i] = tuple(None if leaf is None else leaf[r] for leaf in out)
    return results


def seq2seq_factors(
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
    """(first-step logits ``(U, C)``, log-partitions ``(U,)``, ``{(prompt index, attribute ids): mean
    subword probability}``) for the distinct encoder prompts ``unique`` and each one's ``wanted``
    multi-token attributes."""
    start = int(model.config.decoder_start_token_id)
    rows = [(prompt, (start, *tokens)) for prompt, conts in zip(unique, wanted) for tokens in (conts or [()])]
    outs = run_rows(model, params, rows, batch_size=batch_size, mesh=mesh, progress=progress, buckets=buckets)
    first_logits = np.empty((len(unique), C), dtype=np.float32)
    log_partition = np.empty(len(unique), dtype=np.float64)
    factor: dict[tuple[int, tuple[int, ...]], float] = {}
    for (prompt, decoder), (scores, lse, steps) in zip(rows, outs):
        u = unique[prompt]
        first_logits[u], log_partition[u] = scores[:C], lse
        tokens = decoder[1:]
        if len(tokens) > 1:  # steps[t] = log p(decoder[t+1] | ...): subwords 2..k are t = 1..k-1
            factor[u, tokens] = float(np.exp(steps[1 : len(tokens)].astype(np.float64)).mean())
    return first_logits, log_partition, factor, len(rows)
