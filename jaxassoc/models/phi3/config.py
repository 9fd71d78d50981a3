"""Phi-3 hyper-parameters from a transformers ``config.json`` as a llama ``LlamaLikeConfig`` (a sliding window on
every layer), refusing what the port does not implement: ``longrope`` scaling (the 128k checkpoints) and
any other rope type, partial rotary (Phi-4-mini), other activations."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import required_fields
from jaxassoc.models.llama.config import partial_rotary_factor
from jaxassoc.models.llama_like import LlamaLikeConfig


def _rope_theta(hf_config: dict) -> float:
    """``rope_theta`` of an unscaled rotary embedding (transformers 4 or 5 fields); ModelError naming any
    other rope type (transformers reads Phi-3's 'su' and 'yarn' as 'longrope')."""
    params = hf_config.get("rope_parameters") or {}
    scaling = hf_config.get("rope_scaling") or params
    rope_type = scaling.get("rope_type") or scaling.get("type") or "default"
    if rope_type != "default":
        raise ModelError(
            f"phi3 config: rope scaling rope_type = {rope_type!r} is not supported by the phi3 port: only "
            "unscaled rotary embeddings ('default', the 4k checkpoints) are; 'longrope' (the 128k ones) is refused"
        )
    return float(params.get("rope_theta", hf_config.get("rope_theta", 10000.0)))


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig from a Phi-3 ``config.json`` dict; ModelError naming each field value the port does not
    implement."""
    model_type = hf_config.get("model_type")
    if model_type != "phi3":
        raise ModelError(f"model_type {model_type!r} is not a phi3 model")
    refused = {
        "hidden_act": (hf_config.get("hidden_act", "silu"), "silu"),
        "partial_rotary_factor": (partial_rotary_factor(hf_config), 1.0),
    }
    for key, (value, supported) in refused.items():
        if value != supported:
            raise ModelError(f"phi3 config: {key} = {value!r} is not supported by the phi3 port (only {supported!r})")
    rope_theta = _rope_theta(hf_config)
    with required_fields("phi3"):
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        window = hf_config.get("sliding_window")
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
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            sliding_window=int(window) if window is not None else None,
        )
    if heads % kv_heads:
        raise ModelError(
            f"phi3 config: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
        )
    if config.head_dim % 2:
        raise ModelError(f"phi3 config: head_dim = {config.head_dim} must be even for rotary embeddings")
    return config
