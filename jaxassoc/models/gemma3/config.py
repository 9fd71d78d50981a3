"""Gemma 3 text hyper-parameters (``model_type`` gemma3_text) from a transformers ``config.json`` (v4 or v5
rotary fields): Gemma 2's, plus the local layers' own rotary base and an optional linear scaling of the
global layers' rotary embeddings; refusing what the port does not implement (attention soft-capping,
other rotary scalings, biases, bidirectional attention, other layer types)."""

from __future__ import annotations

from jaxassoc.models.gemma2.config import (
    LAYER_TYPES,
    check_model_type,
    common_fields,
    refuse,
    softcap,
    with_scaling,
)
from jaxassoc.models.llama_like import LlamaLikeConfig
from jaxassoc.models.rope import RopeScaling


def rope_of_layers(hf_config: dict, model_type: str) -> tuple[dict, dict]:
    """(global, local) rotary parameters: transformers 5's ``rope_parameters`` per layer type, or transformers
    4's ``rope_theta`` / ``rope_local_base_freq`` with ``rope_scaling`` for the global layers."""
    params = hf_config.get("rope_parameters") or {}
    nested = any(t in params for t in LAYER_TYPES)
    full = dict(params.get("full_attention") or {}) if nested else {}
    local = dict(params.get("sliding_attention") or {}) if nested else {}
    full.setdefault("rope_theta", hf_config.get("rope_theta", 1_000_000.0))
    local.setdefault("rope_theta", hf_config.get("rope_local_base_freq", 10_000.0))
    return with_scaling(full, hf_config.get("rope_scaling"), model_type), with_scaling(local, None, model_type)


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig (Gemma 3's flags) from a transformers ``config.json`` dict; ModelError naming what the port does not implement."""
    model_type = check_model_type(hf_config, "gemma3_text")
    full, local = rope_of_layers(hf_config, model_type)
    if (full.get("rope_type") or "default") not in ("default", "linear"):
        refuse(model_type, "rope_scaling", full["rope_type"], "global layers: rope_type 'default' or 'linear'")
    if (local.get("rope_type") or "default") != "default":
        refuse(model_type, "rope_parameters.sliding_attention", local["rope_type"], "local layers: rope_type 'default'")
    attn_cap = hf_config.get("attn_logit_softcapping")
    if attn_cap is not None:
        refuse(model_type, "attn_logit_softcapping", attn_cap, "Gemma 3 has no attention soft-capping: only None")
    linear = RopeScaling("linear", float(full.get("factor", 1.0))) if full.get("rope_type") == "linear" else None
    return LlamaLikeConfig(
        **common_fields(hf_config, model_type, pattern=int(hf_config.get("sliding_window_pattern") or 6)),
        qk_norm=True,
        rope_theta=float(full["rope_theta"]),
        final_logit_softcapping=softcap(hf_config, "final_logit_softcapping", None),
        rope_local_theta=float(local["rope_theta"]),
        rope_scaling=linear,
    )
