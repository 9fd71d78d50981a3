"""OPT's hyper-parameters from a HF ``config.json`` (OPTConfig), refusing what the port does not implement."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("opt",)


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """OPT (Zhang et al. 2022) as a GPTLikeConfig: learned positions read at ``position + 2`` (HF's
    ``OPTLearnedPositionalEmbedding`` offset), biases everywhere, ReLU; pre-LN (``do_layer_norm_before``) or
    post-LN without a final LayerNorm (opt-350m); word embeddings projected in and out when
    ``word_embed_proj_dim != hidden_size``. ModelError naming each field value the port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"opt port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    with required_fields("opt"):
        config = _config(hf_config)
    if config.hidden_size % config.num_attention_heads:
        raise ModelError(
            f"OPT config: hidden_size={config.hidden_size} is not a multiple of "
            f"num_attention_heads={config.num_attention_heads}"
        )
    return config


def _config(hf_config: dict) -> GPTLikeConfig:
    hidden = int(hf_config["hidden_size"])
    pre_ln = bool(hf_config.get("do_layer_norm_before", True))
    return GPTLikeConfig(
        model_type="opt",
        hf_names=(("intermediate_size", "ffn_dim"), ("word_embed_dim", "word_embed_proj_dim")),
        vocab_size=int(hf_config["vocab_size"]),
        hidden_size=hidden,
        intermediate_size=int(hf_config["ffn_dim"]),
        num_hidden_layers=int(hf_config["num_hidden_layers"]),
        num_attention_heads=int(hf_config["num_attention_heads"]),
        max_position_embeddings=int(hf_config["max_position_embeddings"]),
        layer_norm_eps=1e-5,  # torch.nn.LayerNorm's default; OPTConfig has no field for it
        activation=check_activation(hf_config.get("activation_function", "relu"), "activation_function"),
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
        position_offset=2,
        residual="sequential" if pre_ln else "post",
        # OPTDecoder: a final LayerNorm only for pre-LN models that do not set _remove_final_layer_norm
        final_norm=pre_ln and not bool(hf_config.get("_remove_final_layer_norm", False)),
        word_embed_dim=int(hf_config.get("word_embed_proj_dim") or hidden),
    )
