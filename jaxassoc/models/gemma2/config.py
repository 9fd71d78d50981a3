"""Gemma 2 hyper-parameters from a transformers ``config.json`` (v4 or v5 rotary fields), refusing what the
port does not implement (scaled rotary embeddings, biases, bidirectional attention, other layer types)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import check_activation, required_fields
from jaxassoc.models.llama_like import LlamaLikeConfig

LAYER_TYPES = ("sliding_attention", "full_attention")


def refuse(model_type: str, field: str, value, supported: str) -> None:
    """ModelError naming a config field whose value the port does not implement."""
    raise ModelError(
        f"{model_type} config: {field} = {value!r} is not supported by the {model_type} port "
        f"({supported}); use a checkpoint without it"
    )


def check_model_type(hf_config: dict, expected: str) -> str:
    model_type = hf_config.get("model_type")
    if model_type != expected:
        raise ModelError(f"model_type {model_type!r} is not a {expected} model")
    return model_type


def rope_params(hf_config: dict, model_type: str) -> dict:
    """The rotary parameters: transformers 5's ``rope_parameters`` or transformers 4's ``rope_theta`` /
    ``rope_scaling`` fields, as one dict (``rope_type``, ``rope_theta``, a scaling ``factor``...)."""
    params = dict(hf_config.get("rope_parameters") or {})
    params.setdefault("rope_theta", hf_config.get("rope_theta", 10000.0))
    return with_scaling(params, hf_config.get("rope_scaling"), model_type)


def with_scaling(params: dict, scaling: dict | None, model_type: str) -> dict:
    """``params`` updated by a transformers 4 ``rope_scaling`` dict; partial rotary embeddings refused."""
    if scaling is not None:
        params = {
            **params,
            **{k: v for k, v in scaling.items() if k != "type"},
            "rope_type": scaling.get("rope_type", scaling.get("type")),
        }
    if params.get("partial_rotary_factor", 1.0) != 1.0:
        refuse(model_type, "partial_rotary_factor", params["partial_rotary_factor"], "only full rotary embeddings")
    return params


def layer_types(hf_config: dict, model_type: str, n_layers: int, pattern: int) -> tuple[bool, ...]:
    """Which layers are local (sliding-window): ``layer_types`` if given, else every layer but each
    ``pattern``-th (transformers' default: Gemma 2 alternates, pattern 2; Gemma 3's ``sliding_window_pattern``)."""
    types = hf_config.get("layer_types")
    if types is None:
        return tuple(bool((i + 1) % pattern) for i in range(n_layers))
    unknown = sorted({t for t in types if t not in LAYER_TYPES})
    if unknown:
        refuse(model_type, "layer_types", unknown, f"only {list(LAYER_TYPES)}")
    if len(types) != n_layers:
        raise ModelError(
            f"{model_type} config: layer_types has {len(types)} entries but num_hidden_layers = "
            f"{n_layers}; give one per layer"
        )
    return tuple(t == "sliding_attention" for t in types)


def common_fields(hf_config: dict, model_type: str, pattern: int) -> dict:
    """The fields Gemma 2 and Gemma 3 read alike (refusing biases, bidirectional attention, a missing window)."""
    refused = {
        "attention_bias": (bool(hf_config.get("attention_bias", False)), False),
        "use_bidirectional_attention": (bool(hf_config.get("use_bidirectional_attention") or False), False),
    }
    for field, (value, supported) in refused.items():
        if value != supported:
            refuse(model_type, field, value, f"only {supported!r}")
    with required_fields(model_type):
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        n_layers = int(hf_config["num_hidden_layers"])
        activation = hf_config.get("hidden_activation") or hf_config.get("hidden_act") or "gelu_pytorch_tanh"
        field = "hidden_activation" if hf_config.get("hidden_activation") else "hidden_act"
        local = layer_types(hf_config, model_type, n_layers, pattern)
        window = hf_config.get("sliding_window")
        if any(local) and not window:
            refuse(model_type, "sliding_window", window, "local (sliding_attention) layers need a window >= 1")
        fields = dict(
            model_type=model_type,
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config["intermediate_size"]),
            num_hidden_layers=n_layers,
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=int(hf_config.get("head_dim") or hidden // heads),
            rms_norm_eps=float(hf_config["rms_norm_eps"]),
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            query_pre_attn_scalar=float(hf_config["query_pre_attn_scalar"]),
            mlp_activation=check_activation(activation, field),
            norm="gemma",
            post_norms=True,
            embed_scale=True,
            local_layers=local,
            sliding_window=int(window) if any(local) else None,
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
        )
    if heads % kv_heads:
        raise ModelError(
            f"{model_type} config: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
        )
    if fields["head_dim"] % 2:
        refuse(model_type, "head_dim", fields["head_dim"], "rotary embeddings need an even head_dim")
    return fields


def softcap(hf_config: dict, field: str, default: float | None) -> float | None:
    value = hf_config.get(field, default)
    return None if value is None else float(value)


def config_from_hf(hf_config: dict) -> LlamaLikeConfig:
    """A LlamaLikeConfig (Gemma 2's flags) from a transformers ``config.json`` dict; ModelError naming what the port does not implement."""
    model_type = check_model_type(hf_config, "gemma2")
    rope = rope_params(hf_config, model_type)
    rope_type = rope.get("rope_type") or "default"
    if rope_type != "default":
        refuse(model_type, "rope_scaling", rope_type, "only unscaled rotary embeddings, rope_type 'default'")
    return LlamaLikeConfig(
        **common_fields(hf_config, model_type, pattern=2),
        rope_theta=float(rope["rope_theta"]),
        attn_logit_softcapping=softcap(hf_config, "attn_logit_softcapping", 50.0),
        final_logit_softcapping=softcap(hf_config, "final_logit_softcapping", 30.0),
    )
