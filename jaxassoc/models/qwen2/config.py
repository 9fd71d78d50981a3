"""Qwen2 / Qwen2.5 hyper-parameters from a transformers ``config.json`` as a llama ``LlamaLikeConfig`` with
query/key/value biases and the layers that use the sliding window, refusing what the port does not
implement (rope types other than default / linear / dynamic / llama3 (e.g. Qwen2.5's long-context yarn),
partial rotary, other activations, layer types other than full / sliding attention)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.hf_config import superseded
from jaxassoc.models.layers import required_fields
from jaxassoc.models.llama.config import partial_rotary_factor
from jaxassoc.models.llama_like import LlamaLikeConfig, config_from_fields
from jaxassoc.models.rope import rope_scaling_from_hf

LAYER_TYPES = ("full_attention", "sliding_attention")


def local_layers(hf_config: dict, n_layers: int) -> tuple[bool, ...]:
    """Which layers use the sliding window: transformers 5's ``layer_types`` if given, else its default from
    ``use_sliding_window`` and ``max_window_layers`` (layers from ``max_window_layers`` on slide)."""
    layer_types = hf_config.get("layer_types")
    superseded(hf_config, "max_window_layers")  # layer_types, when given, decides
    window = hf_config.get("sliding_window") if hf_config.get("use_sliding_window") else None
    if layer_types is None:
        first = int(hf_config.get("max_window_layers", 28))
        return tuple(window is not None and i >= first for i in range(n_layers))
    unknown = sorted(set(layer_types) - set(LAYER_TYPES))
    if unknown:
        raise ModelError(
            f"qwen2 config: layer_types has {unknown}, which the port does not implement (only {list(LAYER_TYPES)})"
        )
    if len(layer_types) != n_layers:
        raise ModelError(
            f"qwen2 config: layer_types names {len(layer_types)} layers but num_hidden_layers = {n_layers}"
        )
    flags = tuple(t == "sliding_attention" for t in layer_types)
    if any(flags) and window is None:
        raise ModelError(
            "qwen2 config: layer_types has sliding_attention layers but no window "
            f"(use_sliding_window = {hf_config.get('use_sliding_window')!r}, sliding_window = "
            f"{hf_config.get('sliding_window')!r}): set both or make every layer full_attention"
        )
    return flags


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig (``qkv_bias``, ``local_layers``) from a Qwen2 ``config.json`` dict; ModelError naming
    each field value the port does not implement."""
    model_type = hf_config.get("model_type")
    if model_type != "qwen2":
        raise ModelError(f"model_type {model_type!r} is not a qwen2 model")
    if partial_rotary_factor(hf_config) != 1.0:  # from rope_parameters too; hidden_act: ConfigTaker refuses it
        raise ModelError(
            f"qwen2 config: partial_rotary_factor = {partial_rotary_factor(hf_config)!r} is not supported by the "
            "qwen2 port (only 1.0)"
        )
    rope_theta, rope_scaling = rope_scaling_from_hf(hf_config, model_type)
    with required_fields(model_type):
        flags = local_layers(hf_config, int(hf_config["num_hidden_layers"]))
        window = int(hf_config["sliding_window"]) if any(flags) else None
    return config_from_fields(
        hf_config,
        model_type,
        rope_theta=rope_theta,
        rope_scaling=rope_scaling,
        sliding_window=window,
        qkv_bias=True,
        local_layers=flags if any(flags) else None,
    )
