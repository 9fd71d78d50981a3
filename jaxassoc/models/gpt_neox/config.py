"""GPT-NeoX / Pythia hyper-parameters from a HF ``config.json`` (transformers 4 ``rotary_pct`` /
``rotary_emb_base`` or 5 ``rope_parameters``), refusing what the port does not implement (scaled rotary
embeddings, attention without biases, other activations)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("gpt_neox",)


def _rope(hf_config: dict) -> tuple[str, float, float]:
    """(rope type, theta, partial rotary factor) as transformers 5 reads them: ``rope_scaling`` or
    ``rope_parameters``, with the legacy ``rotary_emb_base`` / ``rotary_pct`` as defaults."""
    params = hf_config.get("rope_scaling") or hf_config.get("rope_parameters") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    theta = params.get("rope_theta", hf_config.get("rotary_emb_base", 10000.0))
    factor = params.get("partial_rotary_factor", hf_config.get("rotary_pct", 0.25))
    return rope_type, float(theta), float(factor)


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """GPT-NeoX / Pythia (Black et al. 2022; Biderman et al. 2023) as a GPTLikeConfig: rotary positions on the
    first ``rotary_pct`` of each head ("rotate half" within them), biases everywhere, the parallel residual
    (``use_parallel_residual``) or the sequential one; ModelError naming each field value the port does not
    implement."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"gpt_neox port: model_type {model_type!r} is not one of {MODEL_TYPES}")
    rope_type, theta, factor = _rope(hf_config)
    if rope_type != "default":
        raise ModelError(
            f"gpt_neox config: rope_type {rope_type!r} (rope_scaling / rope_parameters) is not supported: only "
            "unscaled rotary embeddings (rope_type 'default') are"
        )
    if hf_config.get("attention_bias", True) is not True:
        raise ModelError(
            f"gpt_neox config field attention_bias={hf_config['attention_bias']!r} is not supported (only True: "
            "query_key_value and dense with biases)"
        )
    with required_fields("gpt_neox"):
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        config = GPTLikeConfig(
            model_type="gpt_neox",
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config["intermediate_size"]),
            num_hidden_layers=int(hf_config["num_hidden_layers"]),
            num_attention_heads=heads,
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            layer_norm_eps=float(hf_config.get("layer_norm_eps", 1e-5)),
            activation=check_activation(hf_config.get("hidden_act", "gelu"), "hidden_act"),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            positions="rotary",
            rotary_dim=int(hidden // heads * factor),
            rope_theta=theta,
            residual="parallel" if hf_config.get("use_parallel_residual", True) else "sequential",
        )
    if hidden % heads:
        raise ModelError(f"gpt_neox config: hidden_size = {hidden} is not a multiple of num_attention_heads = {heads}")
    if config.rotary_dim % 2 or not 0 <= factor <= 1:
        raise ModelError(
            f"gpt_neox config: partial_rotary_factor (rotary_pct) = {factor} gives {config.rotary_dim} rotary "
            f"dimensions of head_dim {config.head_dim}; it must give an even number between 0 and head_dim"
        )
    return config
