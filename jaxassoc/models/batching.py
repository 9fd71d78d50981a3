"""Running a jitted model function over many token sequences with static shapes.

Sequences are sorted by length and grouped; each group is padded to the smallest length bucket that
holds its longest sequence and to one fixed batch size, so the function compiles at most once per
bucket. Outputs come back per sequence, in the input order, with padding removed.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.models.partitioning import batch_size_multiple, is_placed_on
from jaxassoc.models.sharding import data_mesh, replicate, shard_batch, to_host

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


def batch_mesh(shard: bool | Mesh, params: Any) -> tuple[Mesh | None, Any]:
    """The mesh a batch is split over and the params to run it with. ``True``: all devices along
    ``"data"``, params replicated; a Mesh: leaves already sharded over it (a model loaded with
    ``load_model(..., mesh=mesh)``) kept as they are, other leaves (small inputs a metric adds, such as
    row indices) replicated over it; ``False``: no mesh."""
    if isinstance(shard, Mesh):
        return shard, jax.tree.map(lambda x: x if is_placed_on(x, shard) else replicate(x, shard), params)
    if shard:
        mesh = data_mesh()
        return mesh, replicate(params, mesh)
    return None, params


def model_shard(model: LanguageModel) -> bool | Mesh:
    """What to pass as ``shard=`` for ``model``: the mesh its params are sharded over, else False."""
    return model.mesh if model.mesh is not None else False


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
    shard: bool | Mesh = False,
    progress: bool = False,
    per_token: bool = True,
) -> list:
    """``fn(params, ids, mask)`` over all sequences; one output pytree (NumPy) per sequence, in input order.

    ``fn`` should be jitted: shapes are ``(B, bucket)`` with one fixed ``B`` per call, so it compiles at
    most once per bucket (``fn._cache_size()`` counts compilations). ``B`` is ``batch_size``, or the
    next power of two >= the number of sequences when that is smaller; with ``shard=True`` it is rounded
    up to a multiple of the device count, the batch axis is split over all devices and ``params`` are
    replicated; with ``shard=mesh`` (a ``("data", "fsdp", "tp")`` mesh, see
    :mod:`jaxassoc.models.partitioning`), ``params`` should already be sharded over it
    (``load_model(..., mesh=mesh)``; :func:`model_shard`), ``B`` is rounded up to a multiple of
    ``data × fsdp`` and the batch is split over those axes. With several
    processes (multi-host) each feeds its own rows and every process gets all outputs back
    (:mod:`jaxassoc.models.sharding`). Output leaves whose axis 1 has the padded length are cut to each
    sequence's tokens (e.g. hidden states ``(T, D)``); other leaves are returned per row as they are. Pass
    ``per_token=False`` when every output is per row and one of its axes could equal a bucket length
    (e.g. logits of 16 attribute words): then nothing is cut.
    """
    if padding_side not in ("left", "right"):
        raise ConfigError(f"padding_side={padding_side!r}: use 'left' or 'right'")
    if batch_size < 1:
        raise ConfigError(f"batch_size={batch_size} must be at least 1")
    check_sequences(sequences, max_length, vocab_size)
    B = min(batch_size, 1 << (len(sequences) - 1).bit_length())
    mesh, params = batch_mesh(shard, params)
    if mesh is not None:
        n_dev = batch_size_multiple(mesh)
        B = -(-B // n_dev) * n_dev
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    groups = [order[i : i + B] for i in range(0, len(order), B)]
    if progress:
        from tqdm.auto import tqdm

        groups = tqdm(groups, desc="batches", unit="batch")
    results: list = [None] * len(sequences)
    for group in groups:
        batch = [sequences[i] for i in group]
        length = bucket_length(max(len(s) for s in batch), buckets, max_length)
        ids, mask = pad_batch(batch, length, B, pad_id, padding_side)
        if mesh is not None:
            ids, mask = shard_batch((ids, mask), mesh)
        out = fn(params, ids, mask)
        out = to_host(out) if mesh is not None else jax.tree.map(np.asarray, out)  # to_host: all rows on every process
        for row, i in enumerate(group):
            n = len(sequences[i])
            if per_token:
                results[i] = jax.tree.map(lambda leaf: _unpad(leaf, row, n, length, padding_side), out)
            else:
                results[i] = jax.tree.map(lambda leaf: leaf[row], out)
    return results
