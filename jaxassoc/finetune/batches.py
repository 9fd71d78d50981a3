"""Training rows and the batches of each step (docs/methods.md §13.3): fixed-shape arrays built on the host,
the same for every step of a run and after a resume.

A sentence becomes one row of ``seq_len`` tokens (a causal LM's with its start token first, a masked LM's with
its special tokens; longer sentences truncated, shorter ones padded). The rows of step ``s`` are a slice of a
permutation of all rows drawn per epoch from ``(seed, epoch)``, so a run resumed at step ``s`` sees the batches
the uninterrupted run would have; a masked LM's masked positions are drawn from ``(seed, step)`` the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxassoc.errors import InputError

MASK_SHARE = 0.15
"""Masked-token training: the share of each row's text tokens replaced by the mask token (Devlin et al. 2019,
§3.1; here always the mask token, no 80/10/10 split), at least one."""


def token_rows(model: Any, sentences: Sequence[str], seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, mask)`` ``(N, seq_len)`` int32 of ``sentences`` as ``model`` scores them (a causal LM's start
    token first; a masked LM's special tokens), truncated or right-padded; InputError for a text without
    tokens."""
    if model.objective == "causal":
        start = model.vocab.bos_id if model.vocab.bos_id is not None else model.vocab.eos_id
        encoded = [([] if start is None else [int(start)]) + list(ids)
                   for ids in model.tokenizer(list(sentences), add_special_tokens=False)["input_ids"]]  # fmt: skip
    else:
        encoded = model.tokenizer(list(sentences))["input_ids"]
    pad = model.vocab.pad_id if model.vocab.pad_id is not None else 0
    ids = np.full((len(encoded), seq_len), pad, np.int32)
    mask = np.zeros((len(encoded), seq_len), np.int32)
    for row, (text, seq) in enumerate(zip(sentences, encoded)):
        if not seq:
            raise InputError(f"training text {text!r} has no tokens")
        seq = seq[:seq_len]
        ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
    return ids, mask


def causal_rows(ids: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Next-token training rows: position t predicts token t + 1 where both are real."""
    labels = np.zeros_like(ids)
    labels[:, :-1] = ids[:, 1:]
    weights = np.zeros(ids.shape, np.float32)
    weights[:, :-1] = mask[:, 1:]
    return {"inputs": ids, "mask": mask, "labels": labels, "weights": weights}


def masked_rows(ids: np.ndarray, mask: np.ndarray, special: np.ndarray, mask_id: int, rng: np.random.Generator):
    """Masked-token training rows: :data:`MASK_SHARE` of each row's text tokens (``mask`` and not ``special``)
    replaced by ``mask_id``, each predicting its own token."""
    text = (mask == 1) & ~special
    draws = rng.random(ids.shape)
    chosen = np.zeros(ids.shape, bool)
    for row in range(ids.shape[0]):
        where = np.flatnonzero(text[row])
        if where.size:
            k = max(1, int(round(MASK_SHARE * where.size)))
            chosen[row, where[np.argsort(draws[row, where], kind="stable")[:k]]] = True
    return {"inputs": np.where(chosen, mask_id, ids).astype(np.int32), "mask": mask, "labels": ids,
            "weights": chosen.astype(np.float32)}  # fmt: skip


def step_rows(n_rows: int, batch: int, step: int, seed: int) -> np.ndarray:
    """The row indices of step ``step`` (``batch`` of them): consecutive slices of a permutation of the rows
    drawn per epoch from ``(seed, epoch)``, wrapping into the next epoch."""
    out = []
    start = step * batch
    while len(out) < batch:
        epoch, offset = divmod(start + len(out), n_rows)
        order = np.random.default_rng([seed, epoch]).permutation(n_rows)
        out.extend(order[offset : offset + batch - len(out)].tolist())
    return np.asarray(out)


def split_micro(rows: dict[str, np.ndarray], micro: int) -> dict[str, np.ndarray]:
    """Rows ``(batch, ...)`` as ``(micro, batch // micro, ...)`` micro batches."""
    return {k: v.reshape(micro, v.shape[0] // micro, *v.shape[1:]) for k, v in rows.items()}
