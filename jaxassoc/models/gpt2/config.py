"""GPT-2's hyper-parameters from a HF ``config.json``, refusing the options this port does not implement."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("gpt2",)


@dataclasses.dataclass(frozen=True)
class GPT2Config:
    vocab_size: int
    n_positions: int
    d_model: int
    n_layer: int
    n_head: int
    d_inner: int
    layer_norm_eps: float
    activation: str
    scale_attn_weights: bool
    tie_word_embeddings: bool

    @property
    def max_positions(self) -> int:
        return self.n_positions


def config_from_hf(hf_config: dict) -> GPT2Config:
    """A GPT2Config from a HF ``config.json``; refuses options this port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"gpt2 port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    refused = {
        "add_cross_attention": False,
        "scale_attn_by_inverse_layer_idx": False,
    }
    for field, supported in refused.items():
        if hf_config.get(field, supported) != supported:
            raise ModelError(f"GPT-2 config field {field}={hf_config[field]!r} is not supported (only {supported!r})")
    with required_fields("gpt2"):
        return _config(hf_config)


def _config(hf_config: dict) -> GPT2Config:
    d_model = int(hf_config["n_embd"])
    return GPT2Config(
        vocab_size=int(hf_config["vocab_size"]),
        n_positions=int(hf_config["n_positions"]),
        d_model=d_model,
        n_layer=int(hf_config["n_layer"]),
        n_head=int(hf_config["n_head"]),
        d_inner=int(hf_config.get("n_inner") or 4 * d_model),
        layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-5)),
        activation=check_activation(hf_config.get("activation_function", "gelu_new"), "activation_function"),
        scale_attn_weights=bool(hf_config.get("scale_attn_weights", True)),
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
    )
