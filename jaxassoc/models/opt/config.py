"""OPT's hyper-parameters from a HF ``config.json`` (OPTConfig), refusing what the port does not implement."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("opt",)


@dataclasses.dataclass(frozen=True)
class OPTConfig:
    """The hyper-parameters the forward pass needs (hashable: a static argument under jit)."""

    vocab_size: int
    hidden_size: int
    word_embed_proj_dim: int
    ffn_dim: int
    num_hidden_layers: int
    num_attention_heads: int
    max_position_embeddings: int
    do_layer_norm_before: bool
    final_layer_norm: bool
    activation: str
    tie_word_embeddings: bool
    layer_norm_eps: float = 1e-5  # torch.nn.LayerNorm's default; OPTConfig has no field for it

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings

    @property
    def projected(self) -> bool:
        """Whether the word embeddings are projected in and out (``word_embed_proj_dim != hidden_size``)."""
        return self.word_embed_proj_dim != self.hidden_size


def config_from_hf(hf_config: dict) -> OPTConfig:
    """An OPTConfig from a HF ``config.json`` dict; ModelError naming each field value the port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"opt port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    refused = {
        "enable_bias": True,  # every released OPT checkpoint has biases
        "layer_norm_elementwise_affine": True,
    }
    for field, supported in refused.items():
        if hf_config.get(field, supported) != supported:
            raise ModelError(f"OPT config field {field}={hf_config[field]!r} is not supported (only {supported!r})")
    with required_fields("opt"):
        config = _config(hf_config)
    if config.hidden_size % config.num_attention_heads:
        raise ModelError(
            f"OPT config: hidden_size={config.hidden_size} is not a multiple of "
            f"num_attention_heads={config.num_attention_heads}"
        )
    return config


def _config(hf_config: dict) -> OPTConfig:
    hidden = int(hf_config["hidden_size"])
    pre_ln = bool(hf_config.get("do_layer_norm_before", True))
    return OPTConfig(
        vocab_size=int(hf_config["vocab_size"]),
        hidden_size=hidden,
        word_embed_proj_dim=int(hf_config.get("word_embed_proj_dim") or hidden),
        ffn_dim=int(hf_config["ffn_dim"]),
        num_hidden_layers=int(hf_config["num_hidden_layers"]),
        num_attention_heads=int(hf_config["num_attention_heads"]),
        max_position_embeddings=int(hf_config["max_position_embeddings"]),
        do_layer_norm_before=pre_ln,
        # OPTDecoder: a final LayerNorm only for pre-LN models that do not set _remove_final_layer_norm
        final_layer_norm=pre_ln and not bool(hf_config.get("_remove_final_layer_norm", False)),
        activation=check_activation(hf_config.get("activation_function", "relu"), "activation_function"),
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
    )
