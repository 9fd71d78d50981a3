"""GPT-Neo hyper-parameters from a HF ``config.json``, refusing what the port does not implement (attention
layer types other than global / local, other activations)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("gpt_neo",)
ATTENTION_TYPES: tuple[str, ...] = ("global", "local")


def _attention_layers(hf_config: dict, num_layers: int) -> tuple[str, ...]:
    """``attention_types`` (``[[["global", "local"], 12]]``: the pattern repeated 12 times) expanded per layer."""
    types = hf_config.get("attention_types", [[["global", "local"], 12]])
    try:
        if not all(isinstance(pattern, (list, tuple)) for pattern, _ in types):
            raise TypeError("a pattern is not a list of layer types")
        layers = tuple(kind for pattern, repeat in types for _ in range(int(repeat)) for kind in pattern)
    except (TypeError, ValueError):
        raise ModelError(
            f"gpt_neo config field attention_types={types!r} is malformed: expected a list of "
            "[[types...], repeat] pairs, e.g. [[['global', 'local'], 12]]"
        ) from None
    unknown = sorted(set(layers) - set(ATTENTION_TYPES))
    if unknown:
        raise ModelError(
            f"gpt_neo config field attention_types names attention layer types {unknown} that are not supported "
            f"(only {list(ATTENTION_TYPES)})"
        )
    if len(layers) != num_layers:
        raise ModelError(
            f"gpt_neo config field attention_types={types!r} gives {len(layers)} layers but num_layers = {num_layers}"
        )
    listed = hf_config.get("attention_layers")
    if listed is not None and tuple(listed) != layers:
        raise ModelError(
            f"gpt_neo config: attention_layers={listed!r} disagrees with attention_types={types!r} (expanded: "
            f"{list(layers)}); fix one of them"
        )
    return layers


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """GPT-Neo (Black et al. 2021) as a GPTLikeConfig: GPT-2's decoder with unscaled float32 scores, no q/k/v
    biases, and local layers (``attention_types``) that see their own and the ``window_size - 1`` previous
    positions (transformers' ``tril(ones) XOR tril(ones, -window_size)``, here on position ids, so padding
    and packing keep it); ModelError naming each field value the port does not implement."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"gpt_neo port: model_type {model_type!r} is not one of {MODEL_TYPES}")
    with required_fields("gpt_neo"):
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_heads"])
        num_layers = int(hf_config["num_layers"])
        window = int(hf_config.get("window_size", 256))
        config = GPTLikeConfig(
            model_type="gpt_neo",
            hf_names=(
                ("num_hidden_layers", "num_layers"),
                ("num_attention_heads", "num_heads"),
                ("sliding_window", "window_size"),
            ),
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config.get("intermediate_size") or 4 * hidden),
            num_hidden_layers=num_layers,
            num_attention_heads=heads,
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-5)),
            activation=check_activation(hf_config.get("activation_function", "gelu_new"), "activation_function"),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
            qkv_bias=False,
            attn_scale=1.0,
            f32_scores=True,
            sliding_window=window,
            local_layers=tuple(kind == "local" for kind in _attention_layers(hf_config, num_layers)),
        )
    if hidden % heads:
        raise ModelError(f"gpt_neo config: hidden_size = {hidden} is not a multiple of num_heads = {heads}")
    if window < 1:
        raise ModelError(f"gpt_neo config field window_size={window} is not supported: it must be at least 1")
    return config
