"""Llama / Mistral hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing
what the port does not implement (rope types other than default / linear / dynamic / llama3, partial rotary,
biases, experts, other activations)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import rope_scaling_from_hf
from jaxassoc.models.llama_like import LlamaLikeConfig

MODEL_TYPES = ("llama", "mistral")


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig from a transformers ``config.json`` dict; ModelError for what the port does not implement."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"model_type {model_type!r} is not a llama-family model; expected one of {MODEL_TYPES}")
    refused = {
        "hidden_act": (hf_config.get("hidden_act", "silu"), "silu"),
        "attention_bias": (bool(hf_config.get("attention_bias", False)), False),
        "mlp_bias": (bool(hf_config.get("mlp_bias", False)), False),
        "num_local_experts": (hf_config.get("num_local_experts"), None),
        "partial_rotary_factor": (partial_rotary_factor(hf_config), 1.0),
    }
    for key, (value, supported) in refused.items():
        if value != supported:
            raise ModelError(
                f"{model_type} config: {key} = {value!r} is not supported by the llama port (only {supported!r})"
            )
    rope_theta, rope_scaling = rope_scaling_from_hf(hf_config, model_type)
    try:
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        config = LlamaLikeConfig(
            model_type=model_type,
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config["intermediate_size"]),
            num_hidden_layers=int(hf_config["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=int(hf_config.get("head_dim") or hidden // heads),
            rms_norm_eps=float(hf_config["rms_norm_eps"]),
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            sliding_window=(int(hf_config["sliding_window"]) if hf_config.get("sliding_window") else None)
            if model_type == "mistral"
            else None,
        )
    except KeyError as e:
        raise ModelError(f"{model_type} config is missing the field {e.args[0]!r}") from None
    if heads % kv_heads:
        raise ModelError(
            f"{model_type} config: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
        )
    if config.head_dim % 2:
        raise ModelError(f"{model_type} config: head_dim = {config.head_dim} must be even for rotary embeddings")
    return config


def partial_rotary_factor(hf_config: dict) -> float:
    """The rotated fraction of each head (top level in transformers 4, in ``rope_parameters`` in 5)."""
    params = hf_config.get("rope_parameters") or {}
    return float(params.get("partial_rotary_factor", hf_config.get("partial_rotary_factor", 1.0)))
