"""BERT / RoBERTa hyper-parameters from a HF ``config.json``, refusing what the port does not implement
(relative positions, decoders, cross-attention, unknown activations)."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import check_activation, required_fields
from jaxassoc.models.precision import RunsIn

MODEL_TYPES: tuple[str, ...] = ("bert", "roberta")


@dataclasses.dataclass(frozen=True)
class BertConfig(RunsIn):
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
    for field, supported in (
        ("position_embedding_type", "absolute"),
        ("is_decoder", False),
        ("add_cross_attention", False),
    ):
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
