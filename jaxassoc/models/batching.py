"""Running a jitted model function over many token sequences with static shapes.

Sequences are sorted by length and grouped; each group is padded to the smallest length bucket that
holds its longest sequence and to one fixed batch size, so the function compiles at most once per
bucket. Outputs come back per sequence, in the input order, with padding removed.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.multihost import Feeder, data_mesh, in_batches

DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024, 2048)
FINE_BUCKETS = (8, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128, 256, 512, 1024, 2048)
"""Less padding for many short sequences (prompts, sentences), at the price of a few more compilations."""


def cast_params(params: Any, dtype) -> Any:
    """The params with every floating-point array cast to ``dtype`` (e.g. ``jnp.bfloat16``); ints kept."""
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, params)


def bucket_length(length: int, buckets: Sequence[int], max_length: int | None) -> int:
    """The smallest bucket >= length; buckets above ``max_length`` are replaced by ``max_length``.

    A length above every bucket is padded to the next multiple of the largest bucket (capped likewise).
    """
    cap = max_length or np.inf
    usable = sorted({min(b, cap) for b in buckets})
    for b in usable:
        if b >= length:
            return int(b)
    top = usable[-1]
    return int(min(-(-length // top) * top, cap))


def model_limits(model: LanguageModel) -> dict[str, int]:
    """``pad_id``, ``max_length`` and ``vocab_size`` of a model: pass them to :func:`run_batched`, which
    then refuses overlong sequences and out-of-range token ids before anything reaches XLA (whose
    gathers would clamp a bad id silently)."""
    pad = next((i for i in (model.vocab.pad_id, model.vocab.eos_id) if i is not None), 0)
    return {"pad_id": int(pad), "max_length": model.max_positions, "vocab_size": int(model.config.vocab_size)}


def check_sequences(sequences: Sequence[Sequence[int]], max_length: int | None, vocab_size: int | None = None) -> None:
    """InputError for an empty sequence, one longer than ``max_length`` or a token id outside
    ``[0, vocab_size)``, naming the sequence's index."""
    if len(sequences) == 0:
        raise InputError("no sequences to run: pass at least one token sequence")
    for i, seq in enumerate(sequences):
        if len(seq) == 0:
            raise InputError(f"sequence {i} is empty: every input needs at least one token")
        if max_length is not None and len(seq) > max_length:
            raise InputError(
                f"sequence {i} has {len(seq)} tokens, more than the model's context of {max_length}: shorten or drop it"
            )
        if vocab_size is not None and (min(seq) < 0 or max(seq) >= vocab_size):
            bad = [t for t in seq if not 0 <= t < vocab_size]
            raise InputError(f"sequence {i} has token ids {bad[:5]} outside the vocabulary [0, {vocab_size})")


def pad_batch(
    sequences: Sequence[Sequence[int]], length: int, batch_size: int, pad_id: int, padding_side: str
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, mask)`` of shape ``(batch_size, length)``; rows beyond the sequences are one-token dummies."""
    ids = np.full((batch_size, length), pad_id, dtype=np.int32)
    mask = np.zeros((batch_size, length), dtype=np.int32)
    for row in range(batch_size):
        seq = sequences[row] if row < len(sequences) else [pad_id]
        span = slice(0, len(seq)) if padding_side == "right" else slice(length - len(seq), length)
        ids[row, span] = seq
        mask[row, span] = 1
    return ids, mask


def _unpad(leaf: np.ndarray, row: int, n_tokens: int, length: int, padding_side: str) -> np.ndarray:
    """One row of an output leaf; a leaf whose axis 1 is the padded length is cut to the real tokens."""
    x = leaf[row]
    if leaf.ndim >= 2 and leaf.shape[1] == length:
        return x[:n_tokens] if padding_side == "right" else x[length - n_tokens :]
    return x


def legacy_shard(shard: bool | Mesh | None, mesh: Mesh | None) -> Mesh | None:
    """The mesh a batch is split over, from the ``shard=`` of earlier releases (deprecated: pass ``mesh=``;
    ``shard=True`` was ``mesh=multihost.data_mesh()``, ``shard=False`` ``mesh=None``)."""
    if shard is None:
        return mesh
    warnings.warn("shard= is deprecated: pass mesh=model.mesh (or multihost.data_mesh())", DeprecationWarning, 2)
    if isinstance(shard, Mesh):
        return shard
    return data_mesh() if shard else None


def run_batched(
    fn: Callable[[Any, jax.Array, jax.Array], Any],
    params: Any,
    sequences: list[list[int]],
    *,
    batch_size: int = 32,
    buckets: Sequence[int] = DEFAULT_BUCKETS,
    pad_id: int,
    padding_side: str = "right",
    max_length: int | None = None,
    vocab_size: int | None = None,
    mesh: Mesh | None = None,
    progress: bool = False,
    per_token: bool = True,
    shard: bool | Mesh | None = None,
    aligned: list[list[int]] | None = None,
) -> list:
    """``fn(params, ids, mask)`` over all sequences; one output pytree (NumPy) per sequence, in input order.
    ``aligned``: one integer list per sequence, as long as it (e.g. the tokens a masked copy hides), padded
    like the ids and passed to ``fn`` as a fourth argument.

    ``fn`` should be jitted: shapes are ``(B, bucket)`` with one fixed ``B`` per call, so it compiles at
    most once per bucket (``fn._cache_size()`` counts compilations). ``B`` is ``batch_size``, or the
    next power of two >= the number of sequences when that is smaller. With a ``mesh`` (``model.mesh``, a
    ``("data", "fsdp", "tp")`` mesh of :mod:`jaxassoc.models.mesh`, or ``multihost.data_mesh()`` for plain
    data parallelism) ``B`` is rounded up to a multiple of ``data × fsdp``, the batch is split over those
    axes and params not already sharded over the mesh are replicated over it (``multihost.Feeder``). ``shard``
    is the deprecated spelling of ``mesh`` (``legacy_shard``). With several
    processes (multi-host) each feeds its own rows and every process gets all outputs back
    (:mod:`jaxassoc.models.multihost`). Output leaves whose axis 1 has the padded length are cut to each
    sequence's tokens (e.g. hidden states ``(T, D)``); other leaves are returned per row as they are. Pass
    ``per_token=False`` when every output is per row and one of its axes could equal a bucket length
    (e.g. logits of 16 attribute words): then nothing is cut.
    """
    if padding_side not in ("left", "right"):
        raise ConfigError(f"padding_side={padding_side!r}: use 'left' or 'right'")
    if batch_size < 1:
        raise ConfigError(f"batch_size={batch_size} must be at least 1")
    check_sequences(sequences, max_length, vocab_size)
    if aligned is not None and [len(a) for a in aligned] != [len(s) for s in sequences]:
        raise InputError("run_batched: aligned= needs one list per sequence, each as long as its sequence")
    feed = Feeder(params, legacy_shard(shard, mesh))
    B = feed.rows(min(batch_size, 1 << (len(sequences) - 1).bit_length()))
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    results: list = [None] * len(sequences)
    for group in in_batches([order[i : i + B] for i in range(0, len(order), B)], progress):
        batch = [sequences[i] for i in group]
        length = bucket_length(max(len(s) for s in batch), buckets, max_length)
        inputs = pad_batch(batch, length, B, pad_id, padding_side)
        if aligned is not None:
            inputs += pad_batch([aligned[i] for i in group], length, B, pad_id, padding_side)[:1]
        out = feed(fn, *inputs)
        for row, i in enumerate(group):
            n = len(sequences[i])
            if per_token:
                results[i] = jax.tree.map(lambda leaf: _unpad(leaf, row, n, length, padding_side), out)
            else:
                results[i] = jax.tree.map(lambda leaf: leaf[row], out)
    return results
