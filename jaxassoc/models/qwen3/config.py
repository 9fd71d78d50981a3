"""Qwen3 hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing what the
port does not implement: scaled rotary embeddings (e.g. YaRN), q/k/v/o biases, activations other than
SiLU, layer types other than full and sliding-window attention."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.hf_config import superseded
from jaxassoc.models.layers import required_fields
from jaxassoc.models.llama_like import LlamaLikeConfig, config_from_fields
from jaxassoc.models.rope import unscaled_rope_theta

MODEL_TYPE = "qwen3"
LAYER_TYPES = ("full_attention", "sliding_attention")


def _refuse(field: str, value, supported: str) -> None:
    raise ModelError(f"qwen3 config field {field} = {value!r} is not supported by the qwen3 port ({supported})")


def _window(hf_config: dict, n_layers: int) -> tuple[int | None, tuple[bool, ...] | None]:
    """(window, which layers use it) as transformers' LlamaLikeConfig derives them: the window only with
    ``use_sliding_window``; ``layer_types``, or else the layers from ``max_window_layers`` on."""
    window = hf_config.get("sliding_window") if hf_config.get("use_sliding_window", False) else None
    superseded(hf_config, "max_window_layers")  # layer_types, when given, decides
    types = hf_config.get("layer_types") or [
        "sliding_attention"
        if window is not None and i >= int(hf_config.get("max_window_layers", 28))
        else "full_attention"
        for i in range(n_layers)
    ]
    unknown = sorted(set(types) - set(LAYER_TYPES))
    if unknown or len(types) != n_layers:
        _refuse("layer_types", types, f"{n_layers} entries, each one of {LAYER_TYPES}")
    local = tuple(t == "sliding_attention" for t in types)
    if any(local) and not window:
        _refuse("layer_types", types, "sliding_attention layers need use_sliding_window true and a sliding_window")
    return (int(window), local) if any(local) else (None, None)


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig from a transformers ``config.json`` dict; ModelError naming every refused field."""
    if hf_config.get("model_type") != MODEL_TYPE:
        raise ModelError(f"model_type {hf_config.get('model_type')!r} is not a qwen3 model")
    if hf_config.get("hidden_act", "silu") != "silu":
        _refuse("hidden_act", hf_config["hidden_act"], "only 'silu': the feed-forward is a SwiGLU")
    if hf_config.get("attention_bias", False):
        _refuse("attention_bias", hf_config["attention_bias"], "only false: no q/k/v/o biases")
    with required_fields(MODEL_TYPE):
        window, local = _window(hf_config, int(hf_config["num_hidden_layers"]))
    return config_from_fields(
        hf_config,
        MODEL_TYPE,
        head_dim_default=128,
        qk_norm=True,
        rope_theta=unscaled_rope_theta(hf_config, MODEL_TYPE),
        sliding_window=window,
        local_layers=local,
    )
