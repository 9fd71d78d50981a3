"""GPT-2's hyper-parameters from a HF ``config.json`` into a GPTLikeConfig, refusing the options this port does
not implement (cross-attention, scores scaled by the inverse layer index)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig, gpt2_style_config
from jaxassoc.models.layers import required_fields

MODEL_TYPES: tuple[str, ...] = ("gpt2",)


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """GPT-2 as a GPTLikeConfig: learned positions, pre-LayerNorm, biases everywhere, ``gelu_new``, scores
    unscaled when ``scale_attn_weights`` is false; ModelError for options this port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"gpt2 port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    with required_fields("gpt2"):
        scale = None if hf_config.get("scale_attn_weights", True) else 1.0
        return gpt2_style_config(hf_config, "gpt2", tie_default=True, attn_scale=scale)
