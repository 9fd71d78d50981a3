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

from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.bert.config import BertConfig
from jaxassoc.models.layers import (
    ACTIVATIONS,
    Dense,
    LayerNorm,
    attention,
    head_scale,
    merge_heads,
    padding_allowed,
    positions_from_mask,
    scan_layers,
    split_heads,
    zeros,
)


def position_ids(attention_mask: Int[Array, "B T"], config: BertConfig) -> Int[Array, "B T"]:
    """Absolute position ids: BERT from 0; RoBERTa from ``padding_idx + 1`` with padding at ``padding_idx``."""
    positions = positions_from_mask(attention_mask)
    if config.model_type == "roberta":
        return jnp.where(attention_mask.astype(bool), positions + config.padding_idx + 1, config.padding_idx)
    return positions


class BertBlock(nnx.Module):
    """One encoder layer (all layers' parameters stacked on a leading axis of size ``lead``)."""

    def __init__(self, config: BertConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, F, eps = c.hidden_size, c.intermediate_size, c.layer_norm_eps
        self.query = Dense(D, D, lead=lead)
        self.key = Dense(D, D, lead=lead)
        self.value = Dense(D, D, lead=lead)
        self.attn_out = Dense(D, D, lead=lead)
        self.attn_ln = LayerNorm(D, eps, lead=lead)
        self.ffn_in = Dense(D, F, lead=lead)
        self.ffn_out = Dense(F, D, lead=lead)
        self.ffn_ln = LayerNorm(D, eps, lead=lead)
        self.config = config

    def __call__(self, h, allowed):
        c = self.config
        heads = [split_heads(dense(h), c.num_heads) for dense in (self.query, self.key, self.value)]
        a = merge_heads(attention(*heads, allowed, head_scale(c.hidden_size // c.num_heads)))
        h = self.attn_ln(h + self.attn_out(a))
        return self.ffn_ln(h + self.ffn_out(ACTIVATIONS[c.activation](self.ffn_in(h))))


class MLMTransform(nnx.Module):
    """The MLM head's transform before the decoder: dense -> activation -> LayerNorm."""

    def __init__(self, config: BertConfig):
        self.dense = Dense(config.hidden_size, config.hidden_size)
        self.ln = LayerNorm(config.hidden_size, config.layer_norm_eps)
        self.activation = config.mlm_activation

    def __call__(self, h):
        return self.ln(ACTIVATIONS[self.activation](self.dense(h)))


class Bert(nnx.Module):
    """The BERT / RoBERTa body: embeddings, the stacked encoder layers, the MLM transform if any."""

    def __init__(self, config: BertConfig, *, mlm: bool = True):
        c = config
        D = c.hidden_size
        self.word = zeros(c.vocab_size, D)
        self.position = zeros(c.max_position_embeddings, D)
        self.token_type = zeros(c.type_vocab_size, D)
        self.embed_ln = LayerNorm(D, c.layer_norm_eps)
        self.blocks = BertBlock(config, lead=(c.num_layers,))
        self.mlm_transform = MLMTransform(config) if mlm else None
        self.config = config

    def __call__(
        self, input_ids: Int[Array, "B T"], attention_mask: Int[Array, "B T"], *, all_layers: bool = False
    ) -> ForwardOutput:
        """Head input (last layer after the MLM transform, or the last layer itself for encoder-only bodies)
        and optionally HF's ``hidden_states``: embedding output, then every layer's output."""
        embedded = (
            jnp.take(self.word[...], input_ids, axis=0)
            + jnp.take(self.position[...], position_ids(attention_mask, self.config), axis=0)
            + self.token_type[...][0]
        )
        embedded = self.embed_ln(embedded)
        allowed = padding_allowed(attention_mask)

        def step(block, h, _):
            out = block(h, allowed)
            return out, (out if all_layers else None)

        h, per_layer = scan_layers(self.blocks, step, embedded)
        hidden = h if self.mlm_transform is None else self.mlm_transform(h)
        layers = (embedded, *(per_layer[i] for i in range(per_layer.shape[0]))) if all_layers else None
        return ForwardOutput(hidden=hidden, layers=layers)


def new_body(config: BertConfig, body: Mapping | None = None) -> Bert:
    """The body module (zero parameters) with an MLM transform iff ``body`` has one (None: with it)."""
    return Bert(config, mlm=body is None or "mlm_transform" in body)
