"""T5 encoder-decoder (Raffel et al. 2020) as Flax NNX modules, matching ``T5ForConditionalGeneration``.

Pre-norm blocks with T5's LayerNorm (RMS scaling without mean or bias, ``layers.rms_norm``); attention
with no ``1/sqrt(d)`` scaling and a learned relative position bias (bucketed signed distance in the
encoder, past-only distance in the decoder) held by the first layer and added in every layer's self
attention; cross attention has none. Feed-forward ``wo(act(wi_0 x) * wi_1 x)`` (v1.1, gated) or
``wo(act(wi x))`` (original T5). Decoder output times ``d_model**-0.5`` before the head only when the
checkpoint ties it to the embeddings (original T5); v1.1 has an untied head and no rescale.

The module state is ``{"shared", "encoder": {"rel_bias", "blocks", "final_norm"}, "decoder": {...}}``,
blocks stacked on a leading axis and scanned. Blocks are made of the shared sub-modules and names
(``attn_norm``, ``attn`` an :class:`~jaxassoc.models.attention.Attention` with ``q``/``k``/``v``/``o``, the
decoder's ``cross_norm`` and ``cross_attn``, ``mlp_norm``, ``mlp`` a ``GatedMLP`` or an ``MLP``), so
``params["body"]["encoder"]["blocks"]["attn"]["q"]["w"]`` is what it is in every family. ``__call__`` is the encoder (``Family.forward``); ``decode``
runs the decoder teacher-forced over the encoder states. Relative positions are column differences, as in
HF: rows padded on the right or the left give the same states at real tokens.

Named sites (:mod:`jaxassoc.models.sites`) in each stack: ``__call__(..., sites=)`` reads and edits the
encoder's, ``decode(..., sites=)`` the decoder's (with the cross-attention's ``layers.{i}.cross_attn.*``); the decoder's
``final_norm`` is taken before the ``d_model**-0.5`` rescale.
"""

from __future__ import annotations

import math
from typing import Mapping

import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxassoc.models.attention import Attention
from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.layers import finish_sites, scan_blocks, zeros
from jaxassoc.models.masks import padding_allowed
from jaxassoc.models.mlp import MLP, GatedMLP
from jaxassoc.models.norms import RMSNorm
from jaxassoc.models.sites import SiteOps, tap_site
from jaxassoc.models.t5.config import T5Config


def relative_buckets(relative: Int[Array, "T S"], bidirectional: bool, num_buckets: int, max_distance: int):
    """T5's bucket of each relative position ``key - query`` (HF ``_relative_position_bucket``): exact
    buckets for small distances, logarithmic ones up to ``max_distance``; bidirectional halves the buckets
    by sign, unidirectional keeps only the past."""
    buckets = jnp.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative > 0).astype(relative.dtype) * num_buckets
        relative = jnp.abs(relative)
    else:
        relative = -jnp.minimum(relative, 0)
    max_exact = num_buckets // 2
    large = max_exact + (
        jnp.log(jnp.maximum(relative, 1).astype(jnp.float32) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).astype(relative.dtype)
    large = jnp.minimum(large, num_buckets - 1)
    return buckets + jnp.where(relative < max_exact, relative, large)


def position_bias(table: Float[Array, "N H"], T: int, S: int, bidirectional: bool, config: T5Config):
    """The additive bias ``(1, H, T, S)`` of queries at columns ``0..T-1`` over keys ``0..S-1``."""
    relative = jnp.arange(S)[None, :] - jnp.arange(T)[:, None]
    buckets = relative_buckets(relative, bidirectional, config.num_buckets, config.max_distance)
    return jnp.take(table, buckets, axis=0).transpose(2, 0, 1)[None]


def t5_attention(config: T5Config, lead: tuple[int, ...], prefix: str = "attn") -> Attention:
    """T5's attention as the shared sub-module: unscaled scores (the scale is folded into its weights), no
    biases, no rotation (positions enter as the relative bias)."""
    c = config
    return Attention(
        c.d_model, c.num_heads, c.num_heads, c.d_kv, eps=c.layer_norm_epsilon, scale=1.0, rotary=None,
        prefix=prefix, lead=lead,
    )  # fmt: skip


def t5_mlp(config: T5Config, lead: tuple[int, ...]) -> MLP | GatedMLP:
    """``wo(act(wi_0 x) * wi_1 x)`` (gated: the shared GatedMLP's down(act(gate x) * up x)) or ``wo(act(wi x))``."""
    c = config
    if c.gated:
        return GatedMLP(c.d_model, c.d_ff, activation=c.activation, lead=lead)
    return MLP(c.d_model, c.d_ff, activation=c.activation, bias=False, lead=lead)


def sublayer(attn: Attention, norm: RMSNorm, h, allowed, bias, tap, memory=None):
    """An attention sublayer's output from the stream ``h``: normalised (``<prefix>.in``), attending over itself
    or ``memory``, projected (``<prefix>.out``)."""
    x = tap_site(tap, f"{attn.prefix}.in", norm(h))
    return tap_site(tap, f"{attn.prefix}.out", attn.attend(*attn.project(x, None, tap, memory), allowed, bias, tap))


def feed_forward(mlp: MLP | GatedMLP, norm: RMSNorm, h, tap):
    """``h + mlp(norm(h))`` with the sites ``mlp.in``, ``mlp.hidden`` and ``mlp.out``."""
    return h + tap_site(tap, "mlp.out", mlp(tap_site(tap, "mlp.in", norm(h)), tap))


class EncoderBlock(nnx.Module):
    """Self-attention then the MLP, each on the RMS-normalised stream and added to it."""

    def __init__(self, config: T5Config, *, lead: tuple[int, ...] = ()):
        D, eps = config.d_model, config.layer_norm_epsilon
        self.attn_norm, self.attn = RMSNorm(D, eps, lead=lead), t5_attention(config, lead)
        self.mlp_norm, self.mlp = RMSNorm(D, eps, lead=lead), t5_mlp(config, lead)

    def __call__(self, h, allowed, bias, tap=None):
        h = tap_site(tap, "resid_mid", h + sublayer(self.attn, self.attn_norm, h, allowed, bias, tap))
        return feed_forward(self.mlp, self.mlp_norm, h, tap)


class DecoderBlock(nnx.Module):
    """Self-attention, cross-attention over the encoder's states, then the MLP."""

    def __init__(self, config: T5Config, *, lead: tuple[int, ...] = ()):
        D, eps = config.d_model, config.layer_norm_epsilon
        self.attn_norm, self.attn = RMSNorm(D, eps, lead=lead), t5_attention(config, lead)
        self.cross_norm, self.cross_attn = RMSNorm(D, eps, lead=lead), t5_attention(config, lead, "cross_attn")
        self.mlp_norm, self.mlp = RMSNorm(D, eps, lead=lead), t5_mlp(config, lead)

    def __call__(self, h, memory, allowed, bias, cross_allowed, tap=None):
        h = h + sublayer(self.attn, self.attn_norm, h, allowed, bias, tap)
        h = h + sublayer(self.cross_attn, self.cross_norm, h, cross_allowed, None, tap, memory)
        return feed_forward(self.mlp, self.mlp_norm, tap_site(tap, "resid_mid", h), tap)


class Stack(nnx.Module):
    """Encoder or decoder: the first layer's relative-bias table, the stacked blocks, the final norm."""

    def __init__(self, config: T5Config, block, n_layers: int):
        self.rel_bias = zeros(config.num_buckets, config.num_heads, axes=(None, None))
        self.blocks = block(config, lead=(n_layers,))
        self.final_norm = RMSNorm(config.d_model, config.layer_norm_epsilon)


class T5(nnx.Module):
    """The T5 body: shared embeddings, encoder and decoder stacks (the head is ``params["head"]``)."""

    def __init__(self, config: T5Config):
        self.shared = zeros(config.vocab_size, config.d_model, axes=("vocab", "embed"))
        self.encoder = Stack(config, EncoderBlock, config.num_layers)
        self.decoder = Stack(config, DecoderBlock, config.num_decoder_layers)
        self.config = config

    def __call__(
        self,
        input_ids: Int[Array, "B T"],
        attention_mask: Int[Array, "B T"],
        *,
        all_layers: bool = False,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """The encoder: final states after its final norm, on request HF's ``encoder_hidden_states``
        (embeddings, then each block's output, the last one after the final norm) and the encoder's sites."""
        c, enc = self.config, self.encoder
        T = input_ids.shape[1]
        x = jnp.take(self.shared[...], input_ids, axis=0).astype(c.activations)
        bias = position_bias(enc.rel_bias[...], T, T, True, c)
        allowed = padding_allowed(attention_mask)
        h, per_layer, records = scan_blocks(
            enc.blocks, lambda block, h, _, tap: block(h, allowed, bias, tap), x, None, sites=sites, keep=all_layers
        )
        hidden, read = finish_sites(sites, enc.final_norm(h), records)
        layers = (x, *(per_layer[i] for i in range(per_layer.shape[0] - 1)), hidden) if all_layers else None
        return ForwardOutput(hidden=hidden, layers=layers, sites=read)

    def decode(
        self,
        encoder_hidden: Float[Array, "B S D"],
        encoder_mask: Int[Array, "B S"],
        decoder_ids: Int[Array, "B T"],
        decoder_mask: Int[Array, "B T"],
        *,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """The head input at every decoder position, teacher-forced (``decoder_ids`` start with
        ``decoder_start_token_id``; right padding): decoder final norm, times ``d_model**-0.5`` when the
        checkpoint scales its decoder output; and the decoder's sites ``sites`` reads."""
        c, dec = self.config, self.decoder
        T = decoder_ids.shape[1]
        x = jnp.take(self.shared[...], decoder_ids, axis=0).astype(c.activations)
        bias = position_bias(dec.rel_bias[...], T, T, False, c)
        causal = jnp.arange(T)[None, :] <= jnp.arange(T)[:, None]
        allowed = causal[None, None] & padding_allowed(decoder_mask)
        cross = padding_allowed(encoder_mask)

        def run_block(block, h, _, tap):
            return block(h, encoder_hidden, allowed, bias, cross, tap)

        h, _, records = scan_blocks(dec.blocks, run_block, x, None, sites=sites, keep=False)
        hidden, read = finish_sites(sites, dec.final_norm(h), records)
        hidden = hidden * (c.d_model**-0.5) if c.scale_decoder_outputs else hidden
        return ForwardOutput(hidden=hidden, layers=None, sites=read)


def new_body(config: T5Config, body: Mapping | None = None) -> T5:
    """The body module (zero parameters)."""
    return T5(config)
