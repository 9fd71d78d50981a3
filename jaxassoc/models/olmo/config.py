"""OLMo's hyper-parameters from a HF ``config.json`` (LlamaLikeConfig, the ``allenai/OLMo-*-hf`` checkpoints; v4 or
v5 rotary fields), refusing what the port does not implement."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.llama_like import LlamaLikeConfig, config_from_fields

MODEL_TYPES: tuple[str, ...] = ("olmo",)

NORM_EPS = 1e-5
"""OlmoLayerNorm's epsilon (fixed in transformers; LlamaLikeConfig has no field for it)."""


def _rope_theta(hf_config: dict) -> float:
    """``rope_theta`` from a transformers 4 (``rope_theta``/``rope_scaling``) or 5 (``rope_parameters``) config;
    only unscaled rotary embeddings."""
    params = hf_config.get("rope_parameters") or {}
    scaling = hf_config.get("rope_scaling")
    field, rope_type = "rope_parameters.rope_type", params.get("rope_type", "default")
    if scaling is not None:
        field, rope_type = "rope_scaling.rope_type", scaling.get("rope_type", scaling.get("type"))
    if rope_type != "default":
        raise ModelError(
            f"OLMo config field {field}={rope_type!r} is not supported: only unscaled rotary embeddings "
            "(rope_type 'default')"
        )
    return float(params.get("rope_theta", hf_config.get("rope_theta", 10000.0)))


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """An LlamaLikeConfig from a HF ``config.json`` dict; ModelError naming each field value the port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"olmo port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    clip_qkv = hf_config.get("clip_qkv")
    return config_from_fields(
        hf_config,
        "olmo",
        norm="layer",
        rms_norm_eps=NORM_EPS,
        rope_theta=_rope_theta(hf_config),
        clip_qkv=float(clip_qkv) if clip_qkv is not None else None,
    )
