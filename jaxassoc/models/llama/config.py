"""Llama / Mistral hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing
what the port does not implement (rope types other than default / linear / dynamic / llama3, partial rotary,
biases, experts, other activations)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.llama_like import LlamaLikeConfig, config_from_fields
from jaxassoc.models.rope import rope_scaling_from_hf

MODEL_TYPES = ("llama", "mistral")


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig from a transformers ``config.json`` dict; ModelError for what the port does not implement."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"model_type {model_type!r} is not a llama-family model; expected one of {MODEL_TYPES}")
    refused = {  # what the config class does not know (hidden_act, attention_bias...: ConfigTaker refuses them)
        "num_local_experts": (hf_config.get("num_local_experts"), None),
        "partial_rotary_factor": (partial_rotary_factor(hf_config), 1.0),
    }
    for key, (value, supported) in refused.items():
        if value != supported:
            raise ModelError(
                f"{model_type} config: {key} = {value!r} is not supported by the llama port (only {supported!r})"
            )
    rope_theta, rope_scaling = rope_scaling_from_hf(hf_config, model_type)
    window = hf_config.get("sliding_window") if model_type == "mistral" else None
    return config_from_fields(
        hf_config,
        model_type,
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        sliding_window=int(window) if window else None,
    )


def partial_rotary_factor(hf_config: dict) -> float:
    """The rotated fraction of each head (top level in transformers 4, in ``rope_parameters`` in 5)."""
    params = hf_config.get("rope_parameters") or {}
    return float(params.get("partial_rotary_factor", hf_config.get("partial_rotary_factor", 1.0)))
