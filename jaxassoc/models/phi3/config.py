"""Phi-3 hyper-parameters from a transformers ``config.json`` as a llama ``LlamaLikeConfig`` (a sliding window on
every layer), refusing what the port does not implement: ``longrope`` scaling (the 128k checkpoints) and
any other rope type, partial rotary (Phi-4-mini), other activations."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.hf_config import superseded
from jaxassoc.models.llama.config import partial_rotary_factor
from jaxassoc.models.llama_like import LlamaLikeConfig, config_from_fields


def _rope_theta(hf_config: dict) -> float:
    """``rope_theta`` of an unscaled rotary embedding (transformers 4 or 5 fields); ModelError naming any
    other rope type (transformers reads Phi-3's 'su' and 'yarn' as 'longrope')."""
    superseded(hf_config, "original_max_position_embeddings")  # read only by longrope, refused below
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
    if partial_rotary_factor(hf_config) != 1.0:  # from rope_parameters too; hidden_act: ConfigTaker refuses it
        raise ModelError(
            f"phi3 config: partial_rotary_factor = {partial_rotary_factor(hf_config)!r} is not supported by the "
            "phi3 port (only 1.0)"
        )
    rope_theta = _rope_theta(hf_config)
    window = hf_config.get("sliding_window")
    return config_from_fields(
        hf_config, model_type, rope_theta=rope_theta, sliding_window=int(window) if window is not None else None
    )
