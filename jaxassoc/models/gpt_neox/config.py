"""GPT-NeoX / Pythia hyper-parameters from a HF ``config.json`` (transformers 4 ``rotary_pct`` /
``rotary_emb_base`` or 5 ``rope_parameters``), refusing what the port does not implement (scaled rotary
embeddings, attention without biases, other activations)."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("gpt_neox",)


@dataclasses.dataclass(frozen=True)
class GPTNeoXConfig:
    """The hyper-parameters the forward pass needs (hashable: a static argument under jit)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    layer_norm_eps: float
    activation: str
    rotary_dim: int
    """Leading dimensions of each head that rotate (``int(head_dim * partial_rotary_factor)``)."""
    rope_theta: float
    use_parallel_residual: bool
    max_position_embeddings: int
    tie_word_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings


def _rope(hf_config: dict) -> tuple[str, float, float]:
    """(rope type, theta, partial rotary factor) as transformers 5 reads them: ``rope_scaling`` or
    ``rope_parameters``, with the legacy ``rotary_emb_base`` / ``rotary_pct`` as defaults."""
    params = hf_config.get("rope_scaling") or hf_config.get("rope_parameters") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    theta = params.get("rope_theta", hf_config.get("rotary_emb_base", 10000.0))
    factor = params.get("partial_rotary_factor", hf_config.get("rotary_pct", 0.25))
    return rope_type, float(theta), float(factor)


def config_from_hf(hf_config: dict) -> GPTNeoXConfig:
    """A GPTNeoXConfig from a HF ``config.json``; ModelError naming each field value the port does not implement."""
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
        config = GPTNeoXConfig(
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            num_hidden_layers=int(hf_config["num_hidden_layers"]),
            num_attention_heads=heads,
            intermediate_size=int(hf_config["intermediate_size"]),
            layer_norm_eps=float(hf_config.get("layer_norm_eps", 1e-5)),
            activation=check_activation(hf_config.get("hidden_act", "gelu"), "hidden_act"),
            rotary_dim=int(hidden // heads * factor),
            rope_theta=theta,
            use_parallel_residual=bool(hf_config.get("use_parallel_residual", True)),
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
        )
    if hidden % heads:
        raise ModelError(f"gpt_neox config: hidden_size = {hidden} is not a multiple of num_attention_heads = {heads}")
    if config.rotary_dim % 2 or not 0 <= factor <= 1:
        raise ModelError(
            f"gpt_neox config: partial_rotary_factor (rotary_pct) = {factor} gives {config.rotary_dim} rotary "
            f"dimensions of head_dim {config.head_dim}; it must give an even number between 0 and head_dim"
        )
    return config
