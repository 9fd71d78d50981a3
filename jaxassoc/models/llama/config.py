"""Llama / Mistral hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing
what the port does not implement (rope types other than default / linear / dynamic / llama3, partial rotary,
biases, experts, other activations)."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import RopeScaling, rope_scaling_from_hf

MODEL_TYPES = ("llama", "mistral")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """The hyper-parameters the forward pass needs (hashable: a static argument under jit)."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    sliding_window: int | None = None  # Mistral: a token sees itself and the previous window-1 tokens
    rope_scaling: RopeScaling | None = None  # None: unscaled rotary frequencies
    qkv_bias: bool = False  # Qwen2: biases on the query, key and value projections (not the output's)
    local_layers: tuple[bool, ...] | None = None  # Qwen2: the layers using sliding_window (None: all)
    qk_norm: bool = False  # per-head RMSNorm of queries and keys (Qwen3 only)
    num_local_experts: int | None = None  # a mixture of experts in place of the MLP (Mixtral only)
    num_experts_per_tok: int | None = None

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings


def config_from_hf(hf_config: dict) -> LlamaConfig:
    """A LlamaConfig from a transformers ``config.json`` dict; ModelError for what the port does not implement."""
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
        config = LlamaConfig(
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
