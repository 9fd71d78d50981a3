"""T5 hyper-parameters from a HF ``config.json`` (``T5ForConditionalGeneration``: T5 v1.1 and the original
T5), refusing what the port does not implement (decoder-only or encoder-only configs, unknown
feed-forward activations)."""

from __future__ import annotations

import dataclasses

from jaxassoc.errors import ModelError
from jaxassoc.models.layers import ACTIVATIONS, required_fields
from jaxassoc.models.precision import RunsIn


@dataclasses.dataclass(frozen=True)
class T5Config(RunsIn):
    vocab_size: int
    d_model: int
    d_kv: int  # per-head dimension (num_heads * d_kv need not equal d_model)
    d_ff: int
    num_layers: int  # encoder blocks
    num_decoder_layers: int
    num_heads: int
    num_buckets: int  # relative_attention_num_buckets
    max_distance: int  # relative_attention_max_distance
    layer_norm_epsilon: float
    activation: str  # a key of layers.ACTIVATIONS
    gated: bool  # gated feed-forward (v1.1: act(wi_0 x) * wi_1 x)
    scale_decoder_outputs: bool  # original T5: decoder output * d_model**-0.5 before the (tied) head
    tie_word_embeddings: bool  # without lm_head.weight in the checkpoint, the head is the shared embeddings
    decoder_start_token_id: int
    max_positions: int  # longest encoder input checked (relative positions have no table: T5 trained on 512)


def feed_forward(value: str) -> tuple[str, bool]:
    """(activation, gated) of a ``feed_forward_proj`` value (``relu``, ``gated-gelu``, ...), as HF reads it:
    ``gated-gelu`` is the tanh GELU (``gelu_new``); ModelError naming the field otherwise."""
    parts = str(value).split("-")
    gated = len(parts) == 2 and parts[0] == "gated"
    act = "gelu_new" if value == "gated-gelu" else parts[-1]
    if len(parts) > 2 or (len(parts) == 2 and not gated) or act not in ACTIVATIONS:
        raise ModelError(
            f"t5 config field feed_forward_proj={value!r} is not supported; supported: 'ACT' or "
            f"'gated-ACT' with ACT one of {sorted(ACTIVATIONS)}"
        )
    return act, gated


def config_from_hf(hf_config: dict) -> T5Config:
    """A T5Config from a HF ``config.json``; refuses options this port lacks, naming the field."""
    if hf_config.get("model_type") != "t5":
        raise ModelError(f"t5 port: model_type {hf_config.get('model_type')!r} is not 't5'")
    for field, supported in (("is_encoder_decoder", True), ("is_decoder", False), ("add_cross_attention", False)):
        if hf_config.get(field, supported) != supported:
            raise ModelError(
                f"t5 config field {field}={hf_config[field]!r} is not supported (only {supported!r}): "
                "the port runs T5ForConditionalGeneration checkpoints"
            )
    with required_fields("t5"):
        activation, gated = feed_forward(hf_config.get("feed_forward_proj", "relu"))
        # transformers 5 saves tie_word_embeddings=true with the explicit scale_decoder_outputs it derived
        scale = hf_config.get("scale_decoder_outputs", hf_config.get("tie_word_embeddings", True) is not False)
        return T5Config(
            vocab_size=int(hf_config["vocab_size"]),
            d_model=int(hf_config["d_model"]),
            d_kv=int(hf_config["d_kv"]),
            d_ff=int(hf_config["d_ff"]),
            num_layers=int(hf_config["num_layers"]),
            num_decoder_layers=int(hf_config.get("num_decoder_layers") or hf_config["num_layers"]),
            num_heads=int(hf_config["num_heads"]),
            num_buckets=int(hf_config.get("relative_attention_num_buckets", 32)),
            max_distance=int(hf_config.get("relative_attention_max_distance", 128)),
            layer_norm_epsilon=float(hf_config.get("layer_norm_epsilon", 1e-6)),
            activation=activation,
            gated=gated,
            scale_decoder_outputs=bool(scale),
            tie_word_embeddings=hf_config.get("tie_word_embeddings", True) is not False,
            decoder_start_token_id=int(hf_config.get("decoder_start_token_id") or 0),
            max_positions=int(hf_config.get("n_positions") or 512),
        )
