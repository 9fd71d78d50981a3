"""BERT (Devlin et al. 2019) and RoBERTa (Liu et al. 2019) encoders with their masked-LM heads.

Post-LayerNorm encoder: ``h = LN(h + attn(h)); h = LN(h + W2 act(W1 h))``; embeddings are word +
absolute position + token type 0, then LayerNorm. The MLM head transform is dense -> activation ->
LayerNorm (BERT: ``hidden_act``; RoBERTa: erf GELU whatever the config says, as in HF's RobertaLMHead),
followed by the decoder ``Head(W, b)``.

Positions: RoBERTa numbers real tokens from ``padding_idx + 1`` and gives padding ``padding_idx`` (HF's
``create_position_ids_from_input_ids``, here from the attention mask). BERT numbers real tokens from 0
by the mask's cumulative sum: equal to HF's ``arange`` for right padding, and left padding works too.

Encoder-only checkpoints (``BertModel``, e.g. all-MiniLM-L6-v2) have no MLM head: their params have
``head=None`` and ``hidden`` is the last encoder layer's output, so word and sentence vectors still work.
Whether a body has the MLM transform is read from its pytree (the key ``"mlm_transform"``).

Plain ``jax.numpy`` over parameter pytrees (see :mod:`jaxassoc.models.layers`); blocks stacked and scanned.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput, Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.layers import (
    ACTIVATIONS,
    attention,
    check_activation,
    dense,
    head_scale,
    layer_norm,
    merge_heads,
    padding_allowed,
    positions_from_mask,
    required_fields,
    split_heads,
)

MODEL_TYPES: tuple[str, ...] = ("bert", "roberta")
OBJECTIVE = "masked"

# Tensors this port deliberately leaves out: pooler, next-sentence head, position-id buffers.
_IGNORED = ("pooler.", "cls.seq_relationship.", "embeddings.position_ids", "embeddings.token_type_ids")


@dataclasses.dataclass(frozen=True)
class BertConfig:
    model_type: str  # "bert" | "roberta"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    activation: str
    mlm_activation: str
    padding_idx: int  # RoBERTa's position offset; unused by BERT
    tie_word_embeddings: bool

    @property
    def max_positions(self) -> int:
        """Longest input the position table allows (RoBERTa loses ``padding_idx + 1`` rows)."""
        if self.model_type == "roberta":
            return self.max_position_embeddings - self.padding_idx - 1
        return self.max_position_embeddings


def config_from_hf(hf_config: dict) -> BertConfig:
    """A BertConfig from a HF ``config.json`` (bert or roberta); refuses options this port lacks."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"bert port: model_type {model_type!r} is not one of {MODEL_TYPES}")
    for field, supported in (("position_embedding_type", "absolute"), ("is_decoder", False),
                             ("add_cross_attention", False)):
        if hf_config.get(field, supported) != supported:
            raise ModelError(
                f"{model_type} config field {field}={hf_config[field]!r} is not supported (only {supported!r})"
            )
    with required_fields(model_type):
        return _config(hf_config, model_type)


def _config(hf_config: dict, model_type: str) -> BertConfig:
    activation = check_activation(hf_config.get("hidden_act", "gelu"), "hidden_act")
    return BertConfig(
        model_type=model_type,
        vocab_size=int(hf_config["vocab_size"]),
        hidden_size=int(hf_config["hidden_size"]),
        num_layers=int(hf_config["num_hidden_layers"]),
        num_heads=int(hf_config["num_attention_heads"]),
        intermediate_size=int(hf_config["intermediate_size"]),
        max_position_embeddings=int(hf_config["max_position_embeddings"]),
        type_vocab_size=int(hf_config.get("type_vocab_size", 2)),
        layer_norm_eps=float(hf_config.get("layer_norm_eps", 1e-12)),
        activation=activation,
        mlm_activation="gelu" if model_type == "roberta" else activation,
        padding_idx=int(hf_config.get("pad_token_id") or 0) if model_type == "roberta" else 0,
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
    )


def params_from_hf(tensors: Mapping[str, np.ndarray], config: BertConfig) -> dict:
    """``{"body", "head"}`` from HF tensors of a ``*ForMaskedLM`` or ``*Model`` checkpoint.

    The decoder is untied (a copy of the word embeddings when the checkpoint ties them). Without an MLM
    head in the checkpoint, ``head`` is None and the body has no ``"mlm_transform"``.
    """
    c = config
    D, L, F, V = c.hidden_size, c.num_layers, c.intermediate_size, c.vocab_size
    t = TensorTaker(tensors, prefixes=(f"{c.model_type}.",), ignore=_IGNORED, outside=("cls.", "lm_head."))

    def ln(name: str, stacked: bool = True) -> dict:
        get = (lambda n, s: t.stack(f"encoder.layer.{{}}.{n}", L, s)) if stacked else t.take
        return {"scale": get(f"{name}.weight", (D,)), "bias": get(f"{name}.bias", (D,))}

    def linear(name: str, n_in: int, n_out: int) -> dict:  # nn.Linear stores (out, in)
        return {
            "w": t.stack(f"encoder.layer.{{}}.{name}.weight", L, (n_in, n_out), transpose=True),
            "b": t.stack(f"encoder.layer.{{}}.{name}.bias", L, (n_out,)),
        }

    body = {
        "word": t.take("embeddings.word_embeddings.weight", (V, D)),
        "position": t.take("embeddings.position_embeddings.weight", (c.max_position_embeddings, D)),
        "token_type": t.take("embeddings.token_type_embeddings.weight", (c.type_vocab_size, D)),
        "embed_ln": ln("embeddings.LayerNorm", stacked=False),
        "blocks": {
            "query": linear("attention.self.query", D, D),
            "key": linear("attention.self.key", D, D),
            "value": linear("attention.self.value", D, D),
            "attn_out": linear("attention.output.dense", D, D),
            "attn_ln": ln("attention.output.LayerNorm"),
            "ffn_in": linear("intermediate.dense", D, F),
            "ffn_out": linear("output.dense", F, D),
            "ffn_ln": ln("output.LayerNorm"),
        },
    }
    names = _mlm_names(c.model_type)
    head = None
    if any(k.startswith(names["head"]) for k in t.tensors):
        body["mlm_transform"] = {
            "dense": {"w": t.take(names["dense"] + ".weight", (D, D), transpose=True),
                      "b": t.take(names["dense"] + ".bias", (D,))},
            "ln": {"scale": t.take(names["ln"] + ".weight", (D,)), "bias": t.take(names["ln"] + ".bias", (D,))},
        }
        decoder = names["decoder"] + ".weight"
        W = t.take(decoder, (V, D)) if t.has(decoder) or not c.tie_word_embeddings else body["word"]
        # HF applies ``decoder.bias``; tied checkpoints may store only the shared ``bias`` it is tied to,
        # old ones store both (equal), untied transformers-5 ones both (only ``decoder.bias`` is used).
        biases = [t.take(n, (V,)) for n in (names["decoder"] + ".bias", names["bias"]) if t.has(n)]
        b = biases[0] if biases else t.take(names["bias"], (V,))
        head = Head(W=W, b=b)  # placing the params gives the head its own device buffer
    t.finish(c.model_type)
    return {"body": body, "head": head}


def _mlm_names(model_type: str) -> dict[str, str]:
    if model_type == "roberta":
        return {"head": "lm_head.", "dense": "lm_head.dense", "ln": "lm_head.layer_norm",
                "decoder": "lm_head.decoder", "bias": "lm_head.bias"}
    return {"head": "cls.predictions.", "dense": "cls.predictions.transform.dense",
            "ln": "cls.predictions.transform.LayerNorm", "decoder": "cls.predictions.decoder",
            "bias": "cls.predictions.bias"}


def position_ids(attention_mask: Int[Array, "B T"], config: BertConfig) -> Int[Array, "B T"]:
    """Absolute position ids: BERT from 0; RoBERTa from ``padding_idx + 1`` with padding at ``padding_idx``."""
    positions = positions_from_mask(attention_mask)
    if config.model_type == "roberta":
        return jnp.where(attention_mask.astype(bool), positions + config.padding_idx + 1, config.padding_idx)
    return positions


def _block(h: jax.Array, p: dict, allowed: jax.Array, config: BertConfig) -> jax.Array:
    c = config
    heads = [split_heads(dense(h, p[n]), c.num_heads) for n in ("query", "key", "value")]
    a = merge_heads(attention(*heads, allowed, head_scale(c.hidden_size // c.num_heads)))
    h = layer_norm(h + dense(a, p["attn_out"]), p["attn_ln"], c.layer_norm_eps)
    f = dense(ACTIVATIONS[c.activation](dense(h, p["ffn_in"])), p["ffn_out"])
    return layer_norm(h + f, p["ffn_ln"], c.layer_norm_eps)


def forward(
    body: dict,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    *,
    config: BertConfig,
    all_layers: bool = False,
) -> ForwardOutput:
    """Head input (last layer after the MLM transform, or the last layer itself for encoder-only bodies)
    and optionally HF's ``hidden_states``: embedding output, then every layer's output."""
    c = config
    embedded = (
        jnp.take(body["word"], input_ids, axis=0)
        + jnp.take(body["position"], position_ids(attention_mask, c), axis=0)
        + body["token_type"][0]
    )
    embedded = layer_norm(embedded, body["embed_ln"], c.layer_norm_eps)
    allowed = padding_allowed(attention_mask)

    def step(h, p):
        out = _block(h, p, allowed, c)
        return out, (out if all_layers else None)

    h, per_layer = jax.lax.scan(step, embedded, body["blocks"])
    hidden = h
    if "mlm_transform" in body:
        m = body["mlm_transform"]
        hidden = layer_norm(ACTIVATIONS[c.mlm_activation](dense(h, m["dense"])), m["ln"], c.layer_norm_eps)
    layers = (embedded, *(per_layer[i] for i in range(c.num_layers))) if all_layers else None
    return ForwardOutput(hidden=hidden, layers=layers)
