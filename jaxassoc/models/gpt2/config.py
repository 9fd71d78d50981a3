"""GPT-2's hyper-parameters from a HF ``config.json`` into a GPTLikeConfig, refusing the options this port does
not implement (cross-attention, scores scaled by the inverse layer index)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("gpt2",)


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """GPT-2 as a GPTLikeConfig: learned positions, pre-LayerNorm, biases everywhere, ``gelu_new``, scores
    unscaled when ``scale_attn_weights`` is false; ModelError for options this port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"gpt2 port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    refused = {
        "add_cross_attention": False,
        "scale_attn_by_inverse_layer_idx": False,
    }
    for field, supported in refused.items():
        if hf_config.get(field, supported) != supported:
            raise ModelError(f"GPT-2 config field {field}={hf_config[field]!r} is not supported (only {supported!r})")
    with required_fields("gpt2"):
        d_model = int(hf_config["n_embd"])
        return GPTLikeConfig(
            model_type="gpt2",
            hf_names=(
                ("hidden_size", "n_embd"),
                ("intermediate_size", "n_inner"),
                ("num_hidden_layers", "n_layer"),
                ("num_attention_heads", "n_head"),
                ("max_position_embeddings", "n_positions"),
            ),
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=d_model,
            intermediate_size=int(hf_config.get("n_inner") or 4 * d_model),
            num_hidden_layers=int(hf_config["n_layer"]),
            num_attention_heads=int(hf_config["n_head"]),
            max_position_embeddings=int(hf_config["n_positions"]),
            layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-5)),
            activation=check_activation(hf_config.get("activation_function", "gelu_new"), "activation_function"),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
            attn_scale=None if hf_config.get("scale_attn_weights", True) else 1.0,
        )
