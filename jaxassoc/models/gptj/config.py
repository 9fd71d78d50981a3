"""GPT-J hyper-parameters from a HF ``config.json``, refusing what the port does not implement (other
activations, a missing or odd ``rotary_dim``)."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import check_activation, required_fields

MODEL_TYPES: tuple[str, ...] = ("gptj",)


@dataclasses.dataclass(frozen=True)
class GPTJConfig:
    """The hyper-parameters the forward pass needs (hashable: a static argument under jit)."""

    vocab_size: int
    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int
    n_inner: int
    rotary_dim: int
    """Leading dimensions of each head that rotate, in interleaved pairs (0, 1), (2, 3), ..."""
    layer_norm_epsilon: float
    activation: str
    tie_word_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def max_positions(self) -> int:
        return self.n_positions


def config_from_hf(hf_config: dict) -> GPTJConfig:
    """A GPTJConfig from a HF ``config.json``; ModelError naming each field value the port does not implement."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"gptj port: model_type {model_type!r} is not one of {MODEL_TYPES}")
    with required_fields("gptj"):
        d = int(hf_config["n_embd"])
        heads = int(hf_config["n_head"])
        rotary_dim = hf_config.get("rotary_dim", 64)
        if d % heads:
            raise ModelError(f"gptj config: n_embd = {d} is not a multiple of n_head = {heads}")
        if rotary_dim is None or rotary_dim % 2 or not 0 < rotary_dim <= d // heads:
            raise ModelError(
                f"gptj config field rotary_dim={rotary_dim!r} is not supported: it must be an even number of "
                f"dimensions in 2..head_dim ({d // heads}); transformers' GPT-J rotates with a table of the "
                "hidden size when it is null, which does not fit a head"
            )
        return GPTJConfig(
            vocab_size=int(hf_config["vocab_size"]),
            n_positions=int(hf_config["n_positions"]),
            n_embd=d,
            n_layer=int(hf_config["n_layer"]),
            n_head=heads,
            n_inner=int(hf_config.get("n_inner") or 4 * d),
            rotary_dim=int(rotary_dim),
            layer_norm_epsilon=float(hf_config.get("layer_norm_epsilon", 1e-5)),
            activation=check_activation(hf_config.get("activation_function", "gelu_new"), "activation_function"),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
        )
