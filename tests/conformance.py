"""The checks every causal family must pass against transformers (its torch model is the reference).

A family declares one or more :class:`family_specs.Spec` in ``tests/family_specs/<family>.py``
(``SPECS = [...]``): a tiny random config built with transformers, written by the ``tiny_checkpoint``
fixture. ``tests/test_models_conformance.py`` runs, for every spec: next-token logits at every real position within ``atol`` (fp32) of transformers running each sequence
alone, with right and left padding; cached greedy decoding equal to transformers' greedy ``generate``; packed
scoring equal to each sequence alone; continuations of 2 and 4 tokens scored from a shared prompt
(:mod:`jaxassoc.models.continuations`, RPAM's path) equal to transformers on prompt + continuation.
``tests/test_models_conformance_mesh.py`` checks that a 2×4
fsdp×tp mesh gives the single-device results (the 8 simulated CPU devices ``tests/conftest.py`` starts JAX
with, in process).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxassoc.models import model_limits
from jaxassoc.models.batching import pad_batch
from jaxassoc.models.continuations import pack_continuations, prefix_and_continuations
from jaxassoc.models.decoding import greedy_generate
from jaxassoc.models.heads import head_logits, next_token_logprobs
from jaxassoc.models.packing import run_packed


def sequences(vocab: int, n: int = 7, seed: int = 0, low: int = 3, high: int = 14) -> list[list[int]]:
    """``n`` random token sequences of ``low``..``high`` tokens (ids 3.. so no special token is drawn)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab, size=int(k)).tolist() for k in rng.integers(low, high, size=n)]


def torch_logits(reference: torch.nn.Module, seq: list[int]) -> np.ndarray:
    """transformers' logits ``(T, V)`` of one sequence alone (no padding), in float64 for comparison."""
    with torch.no_grad():
        return reference(torch.tensor([seq])).logits[0].double().numpy()


def padded_batch(seqs: list[list[int]], side: str, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    T = max(len(s) for s in seqs)
    ids = np.full((len(seqs), T), pad_id, np.int32)
    mask = np.zeros((len(seqs), T), np.int32)
    for i, s in enumerate(seqs):
        cols = slice(0, len(s)) if side == "right" else slice(T - len(s), T)
        ids[i, cols], mask[i, cols] = s, 1
    return ids, mask


def logits_error(model, reference: torch.nn.Module, seqs: list[list[int]], side: str) -> float:
    """Largest |ours - transformers| over every real position of a ``side``-padded batch."""
    ids, mask = padded_batch(seqs, side)
    hidden = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    logits = np.asarray(head_logits(model.head, hidden), np.float64)
    worst = 0.0
    for i, s in enumerate(seqs):
        real = mask[i].astype(bool)
        worst = max(worst, float(np.abs(logits[i][real] - torch_logits(reference, s)).max()))
    return worst


def torch_greedy(reference: torch.nn.Module, prompt: list[int], n_new: int) -> list[int]:
    with torch.no_grad():
        ids = torch.tensor([prompt])
        out = reference.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=n_new,
            min_new_tokens=n_new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )
    return out[0, len(prompt) :].tolist()


def greedy_mismatches(model, reference: torch.nn.Module, prompts: list[list[int]], n_new: int = 8) -> list:
    """The prompts whose cached greedy continuation differs from transformers' ``generate``."""
    ours = greedy_generate(model, prompts, max_new_tokens=n_new, batch_size=4)
    return [(p, o, r) for p, o in zip(prompts, ours) if o != (r := torch_greedy(reference, p, n_new))]


def token_logprobs_fn(model):
    def fn(params, ids, segments):
        hidden = model.forward(params["body"], ids, segments).hidden
        return next_token_logprobs(params["head"], hidden, ids, segments)

    return jax.jit(fn)


def packed_error(model, reference: torch.nn.Module, seqs: list[list[int]]) -> float:
    """Largest |packed next-token log-prob - transformers' on the sequence alone| (rows really packed)."""
    packed = run_packed(
        token_logprobs_fn(model), model.params, seqs, row_length=32, tokens_per_batch=64, **model_limits(model)
    )
    worst = 0.0
    for seq, got in zip(seqs, packed):
        logp = torch.log_softmax(torch.tensor(torch_logits(reference, seq)), -1)
        ref = logp[:-1].gather(1, torch.tensor(seq[1:])[:, None])[:, 0].numpy()
        worst = max(worst, float(np.abs(np.asarray(got)[: len(seq) - 1] - ref).max()))
    return worst


def continuations_error(
    model, reference: torch.nn.Module, prompts: list[list[int]], continuations: list[list[list[int]]]
) -> float:
    """Largest |log P(subword j+1 | prompt, subwords <= j)| difference between the packed continuations
    of each (left-padded) prompt and transformers on prompt + continuation alone."""
    P, L = max(map(len, prompts)) + 1, 8
    ids, mask = pad_batch(prompts, P, len(prompts), 0, "left")
    packed = np.stack([np.stack(pack_continuations(row, L)) for row in continuations], axis=1)
    _, logprob = jax.jit(prefix_and_continuations, static_argnames="decoder")(
        model.params, ids, mask, *packed, decoder=model.decoder
    )
    worst = 0.0
    for b, (prompt, row) in enumerate(zip(prompts, continuations)):
        at = 0
        for tokens in row:
            logp = torch.log_softmax(torch.tensor(torch_logits(reference, prompt + tokens)), -1)
            ref = logp[len(prompt) : -1].gather(1, torch.tensor(tokens[1:])[:, None])[:, 0].numpy()
            got = np.asarray(logprob[b, at : at + len(tokens) - 1])
            worst, at = max(worst, float(np.abs(got - ref).max())), at + len(tokens) - 1
    return worst
