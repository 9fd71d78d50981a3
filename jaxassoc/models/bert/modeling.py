"""BERT (Devlin et al. 2019) and RoBERTa (Liu et al. 2019) encoders as Flax NNX modules.

Post-LayerNorm encoder: ``h = LN(h + attn(h)); h = LN(h + W2 act(W1 h))``; embeddings are word +
absolute position + token type 0, then LayerNorm. The MLM head transform is dense -> activation ->
LayerNorm (BERT: ``hidden_act``; RoBERTa: erf GELU whatever the config says, as in HF's RobertaLMHead),
followed by the decoder ``Head(W, b)`` (outside the body).

Positions: RoBERTa numbers real tokens from ``padding_idx + 1`` and gives padding ``padding_idx`` (HF's
``create_position_ids_from_input_ids``, here from the attention mask). BERT numbers real tokens from 0
by the mask's cumulative sum: equal to HF's ``arange`` for right padding, and left padding works too.

Encoder-only checkpoints (``BertModel``, e.g. all-MiniLM-L6-v2) have no MLM head: their body has no
``mlm_transform`` (the module is built with the structure of the loaded body, :func:`new_body`) and
``hidden`` is the last encoder layer's output, so word and sentence vectors still work.
"""

from __future__ import annotations

from typing import Mapping

import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Int

from jaxassoc.models.attention import Attention
from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.bert.config import BertConfig
from jaxassoc.models.layers import ACTIVATIONS, finish_sites, scan_blocks, zeros
from jaxassoc.models.linear import Linear
from jaxassoc.models.masks import padding_allowed, positions_from_mask
from jaxassoc.models.mlp import MLP
from jaxassoc.models.norms import LayerNorm
from jaxassoc.models.sites import SiteOps, tap_site


def position_ids(attention_mask: Int[Array, "B T"], config: BertConfig) -> Int[Array, "B T"]:
    """Absolute position ids: BERT from 0; RoBERTa from ``padding_idx + 1`` with padding at ``padding_idx``."""
    positions = positions_from_mask(attention_mask)
    if config.model_type == "roberta":
        return jnp.where(attention_mask.astype(bool), positions + config.padding_idx + 1, config.padding_idx)
    return positions


class BertBlock(nnx.Module):
    """One encoder layer, post-LayerNorm: ``attn_norm(h + attn(h))`` then ``mlp_norm(h + mlp(h))`` (all layers'
    parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: BertConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, eps = c.hidden_size, c.layer_norm_eps
        head_dim = D // c.num_heads
        self.attn = Attention(
            D, c.num_heads, c.num_heads, head_dim, eps=eps, qkv_bias=True, o_bias=True, rotary=None, lead=lead
        )
        self.attn_norm = LayerNorm(D, eps, lead=lead)
        self.mlp = MLP(D, c.intermediate_size, activation=c.activation, lead=lead)
        self.mlp_norm = LayerNorm(D, eps, lead=lead)

    def __call__(self, h, allowed, tap=None):
        """Post-norm: ``attn.in`` is the stream itself, ``resid_mid`` (= ``mlp.in``) after the attention's norm."""
        attended = self.attn.attend(*self.attn.project(tap_site(tap, "attn.in", h), None, tap), allowed, tap=tap)
        h = tap_site(tap, "resid_mid", self.attn_norm(h + tap_site(tap, "attn.out", attended)))
        return self.mlp_norm(h + tap_site(tap, "mlp.out", self.mlp(tap_site(tap, "mlp.in", h), tap)))


class MLMTransform(nnx.Module):
    """The MLM head's transform before the decoder: dense -> activation -> LayerNorm (``norm``)."""

    def __init__(self, config: BertConfig):
        self.dense = Linear(config.hidden_size, config.hidden_size, axes=("embed", None), bias=True)
        self.norm = LayerNorm(config.hidden_size, config.layer_norm_eps)
        self.activation = config.mlm_activation

    def __call__(self, h):
        return self.norm(ACTIVATIONS[self.activation](self.dense(h)))


class Bert(nnx.Module):
    """The BERT / RoBERTa body: embeddings, the stacked encoder layers, the MLM transform if any."""

    def __init__(self, config: BertConfig, *, mlm: bool = True):
        c = config
        D = c.hidden_size
        self.embed = zeros(c.vocab_size, D, axes=("vocab", "embed"))
        self.positions = zeros(c.max_position_embeddings, D, axes=(None, "embed"))
        self.token_type = zeros(c.type_vocab_size, D, axes=(None, "embed"))
        self.embed_norm = LayerNorm(D, c.layer_norm_eps)
        self.layers = BertBlock(config, lead=(c.num_layers,))
        self.mlm_transform = MLMTransform(config) if mlm else None
        self.config = config

    def __call__(
        self,
        input_ids: Int[Array, "B T"],
        attention_mask: Int[Array, "B T"],
        *,
        all_layers: bool = False,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """Head input (last layer after the MLM transform, or the last layer itself for encoder-only bodies)
        and optionally HF's ``hidden_states``: embedding output, then every layer's output; ``sites``: the
        named sites to read and edit (:mod:`jaxassoc.models.sites`)."""
        embedded = (
            jnp.take(self.embed[...], input_ids, axis=0).astype(self.config.activations)  # the residual stream's
            + jnp.take(self.positions[...], position_ids(attention_mask, self.config), axis=0)
            + self.token_type[...][0]
        )
        embedded = self.embed_norm(embedded)
        allowed = padding_allowed(attention_mask)
        h, per_layer, records = scan_blocks(
            self.layers, lambda block, h, _, tap: block(h, allowed, tap), embedded, None, sites=sites, keep=all_layers
        )
        hidden, read = finish_sites(sites, h if self.mlm_transform is None else self.mlm_transform(h), records)
        layers = (embedded, *(per_layer[i] for i in range(per_layer.shape[0]))) if all_layers else None
        return ForwardOutput(hidden=hidden, layers=layers, sites=read)


def new_body(config: BertConfig, body: Mapping | None = None) -> Bert:
    """The body module (zero parameters) with an MLM transform iff ``body`` has one (None: with it)."""
    return Bert(config, mlm=body is None or "mlm_transform" in body)
