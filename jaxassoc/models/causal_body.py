"""The causal decoder body every causal port is (:class:`CausalBody`): token embeddings, the stacked
blocks (:class:`CausalBlock`, scanned), the final norm, the forward pass with its named sites, and
the key/value cache (:class:`KVCache`) with its cached step."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.layers import (
    finish_sites,
    scan_blocks,
    scan_layers,
)
from jaxassoc.models.masks import causal_allowed, positions_from_mask, window_allowed
from jaxassoc.models.precision import RunsIn
from jaxassoc.models.sites import SiteOps, tap_site


class KVCache(NamedTuple):
    """Keys and values of every layer for ``T`` columns: each ``(layers, B, T, key/value heads, head_dim)``."""

    k: Float[Array, "L B T H K"]
    v: Float[Array, "L B T H K"]


def write_columns(k_all: Array, v_all: Array, k: Array, v: Array, start) -> tuple[Array, Array]:
    """One layer's cached keys/values ``(B, T, H, K)`` with the new tokens' written at columns ``start...``."""
    k_all = jax.lax.dynamic_update_slice_in_dim(k_all, k.astype(k_all.dtype), start, axis=1)
    v_all = jax.lax.dynamic_update_slice_in_dim(v_all, v.astype(v_all.dtype), start, axis=1)
    return k_all, v_all


@dataclasses.dataclass(frozen=True)
class DecoderSizes(RunsIn):
    """The sizes every decoder builder's config starts with (``llama_like.LlamaLikeConfig``,
    ``gpt_like.GPTLikeConfig``); frozen and hashable, a static argument under jit."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int


class CausalBlock(nnx.Module):
    """A decoder layer with sub-modules ``attn`` (:class:`~jaxassoc.models.attention.Attention`) and ``mlp``
    and its norms, split where the key/value cache sits. A builder's block defines ``project(h, positions)``
    (queries, keys and values of its input; ``positions`` is what the body's ``layer_positions`` gives) and
    ``attend(h, q, k, v, allowed, bias=None)`` (the layer output from those queries over the (cached) keys
    and values; ``bias`` the body's ``attention_bias``): ``llama_like.LlamaLikeBlock``,
    ``gpt_like.GPTLikeBlock``."""

    def __call__(self, h, positions, allowed, bias=None, tap=None):
        return self.attend(h, *self.project(h, positions, tap), allowed, bias, tap)


class CausalBody(nnx.Module):
    """A causal decoder body holding, by these names, the token embeddings ``embed``, the ``n_layers`` layers
    ``layers`` (one :class:`CausalBlock` whose parameters are stacked on a leading axis, scanned) and
    ``final_norm``. Subclasses build them and may set ``window`` (a sliding window on position ids) with
    ``local_layers`` (which layers use it; None: all) and override ``embed_inputs``, ``head_input``,
    ``block_positions`` / ``layer_positions`` (rotary tables) and ``attention_bias`` (ALiBi)."""

    n_layers: int
    window: int | None = None
    local_layers: tuple[bool, ...] | None = None

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        """(layers, key/value heads, head dim) of the key/value cache."""
        return self.n_layers, self.layers.attn.kv_heads, self.layers.attn.head_dim

    def embed_inputs(self, input_ids: Int[Array, "B T"], positions: Int[Array, "B T"]) -> Float[Array, "B T D"]:
        """The layers' input: the token embeddings (learned-position families add theirs). Indexing clamps an
        id past the table (a padding id, ``vocab_size``) to the last row: finite, where ``jnp.take`` gives NaN. In
        the config's activation dtype (``precision.RunsIn``): the residual stream's from here on."""
        return self.embed[...][input_ids].astype(self.config.activations)

    def head_input(self, h: Float[Array, "B T D"]) -> Float[Array, "B T D"]:
        """The last layer's output as the head reads it: after ``final_norm``."""
        return self.final_norm(h)

    def block_positions(self, positions: Int[Array, "B T"], dtype) -> Any:
        """What the blocks need of the position ids (computed once, outside the layer scan): the ids
        themselves by default; rotary ports override it with their cos/sin tables."""
        return positions

    def layer_positions(self, at: Any, local: Bool[Array, ""]) -> Any:
        """One layer's share of ``block_positions`` (``local``: whether the layer is a windowed one); e.g.
        Gemma 3 gives its local layers other rotary tables. Default: ``at`` itself."""
        return at

    def attention_bias(self, query_positions: Int[Array, "B t"], key_positions: Int[Array, "B T"]) -> Array | None:
        """An additive attention bias broadcastable to ``(B, heads, t, T)`` from position ids (ALiBi), or None."""
        return None

    def _layer_masks(self, allowed, query_positions, key_positions):
        """(global, local or None, per-layer flags ``(L,)``): what each layer of the scan attends with."""
        n_layers = self.n_layers
        if self.window is None:
            return allowed, None, jnp.zeros(n_layers, bool)
        local = window_allowed(allowed, query_positions, key_positions, self.window)
        flags = (True,) * n_layers if self.local_layers is None else self.local_layers
        return allowed, local, jnp.asarray(flags, bool)

    def __call__(
        self,
        input_ids: Int[Array, "B T"],
        attention_mask: Int[Array, "B T"],
        *,
        all_layers: bool = False,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """Final hidden states after the final norm (the head input), and optionally HF's
        ``hidden_states``: the embeddings, then each block's output, the last one after the final norm
        (so ``layers[-1] == hidden``). ``sites``: the named sites to read and edit on the way
        (:mod:`jaxassoc.models.sites`); what was read is ``ForwardOutput.sites``."""
        positions = positions_from_mask(attention_mask)
        if sites is not None and sites.start is not None:
            x = sites.start[1]
        else:
            x = self.embed_inputs(input_ids, positions)
        allowed, local, flags = self._layer_masks(causal_allowed(attention_mask), positions, positions)
        bias = self.attention_bias(positions, positions)
        at = self.block_positions(positions, x.dtype)

        def run_block(block, h, flag, tap):
            mask = allowed if local is None else jnp.where(flag, local, allowed)
            return block(h, self.layer_positions(at, flag), mask, bias, tap)

        h, per_layer, records = scan_blocks(self.layers, run_block, x, flags, sites=sites, keep=all_layers)
        hidden, read = finish_sites(sites, self.head_input(h), records)
        if not all_layers:
            return ForwardOutput(hidden=hidden, layers=None, sites=read)
        layers = (x, *(per_layer[i] for i in range(per_layer.shape[0] - 1)), hidden)
        return ForwardOutput(hidden=hidden, layers=layers, sites=read)

    def init_cache(self, batch: int, length: int, dtype=jnp.float32) -> KVCache:
        """An empty cache for ``batch`` rows of ``length`` columns (prompt + new tokens)."""
        layers, heads, head_dim = self.cache_dims
        shape = (layers, batch, length, heads, head_dim)
        return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))

    def forward_cached(
        self,
        input_ids: Int[Array, "B t"],
        attention_mask: Int[Array, "B T"],
        cache: KVCache,
        start: Int[Array, ""],
        *,
        positions: Int[Array, "B t"] | None = None,
        allowed: Bool[Array, "B 1 t T"] | None = None,
        sites: SiteOps | None = None,
    ) -> tuple[Float[Array, "B t D"], KVCache]:
        """Hidden states (after the final norm) of the tokens at columns ``[start, start + t)`` of rows
        described by the full-length mask, reading earlier columns' keys/values from ``cache`` and writing
        these tokens' into it.

        ``positions`` (their position ids) and ``allowed`` (which of the T cache columns each new token may
        see) default to what the mask gives (:func:`positions_from_mask`, :func:`causal_allowed`); pass
        them to lay out the columns otherwise, e.g. several continuations of one cached prefix side by side
        (block-causal ``allowed``, positions restarting after the prefix). Sliding windows and attention
        biases act on position ids: the cache columns' are the mask's with the new tokens' ``positions``
        written at ``start``. A prompt pass (``start = 0``) followed by one-token steps gives the same
        states as the full forward (tested). ``sites``: edits applied at each step (reads are not kept).
        """
        t = input_ids.shape[1]
        mask_positions = positions_from_mask(attention_mask)
        if positions is None:
            positions = jax.lax.dynamic_slice_in_dim(mask_positions, start, t, axis=1)
        if allowed is None:
            allowed = jax.lax.dynamic_slice_in_dim(causal_allowed(attention_mask), start, t, axis=2)
        keys = jax.lax.dynamic_update_slice_in_dim(
            mask_positions, positions.astype(mask_positions.dtype), start, axis=1
        )
        allowed, local, flags = self._layer_masks(allowed, positions, keys)
        bias = self.attention_bias(positions, keys)
        x = self.embed_inputs(input_ids, positions)
        at = self.block_positions(positions, x.dtype)

        def step(block, h, xs):
            flag, k_all, v_all, index, stacked = xs
            tap = None if sites is None else sites.tap(index, stacked)
            h = tap_site(tap, "resid_pre", h)
            mask = allowed if local is None else jnp.where(flag, local, allowed)
            q, k, v = block.project(h, self.layer_positions(at, flag), tap)
            k_all, v_all = write_columns(k_all, v_all, k, v, start)
            out = tap_site(tap, "resid_post", block.attend(h, q, k_all, v_all, mask, bias, tap))
            return out, (k_all, v_all)

        stacked = {} if sites is None else sites.stacked
        xs = (flags, cache.k, cache.v, jnp.arange(self.n_layers), stacked)
        h, (k, v) = scan_layers(self.layers, step, x, xs)
        hidden, _ = finish_sites(sites, self.head_input(h), None)
        return hidden, KVCache(k, v)
