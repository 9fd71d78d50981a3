"""GPT-J hyper-parameters from a HF ``config.json``, refusing what the port does not implement (other
activations, a missing or odd ``rotary_dim``)."""

from __future__ import annotations

from jaxassoc.errors import ModelError
from jaxassoc.models.gpt_like import GPTLikeConfig, gpt2_style_config
from jaxassoc.models.layers import required_fields

MODEL_TYPES: tuple[str, ...] = ("gptj",)


def config_from_hf(hf_config: dict) -> GPTLikeConfig:
    """GPT-J (Wang & Komatsuzaki 2021) as a GPTLikeConfig: parallel blocks fed by one LayerNorm, rotary
    positions (base 10000) on the first ``rotary_dim`` dimensions of each head in interleaved pairs, float32
    scores, biases on the MLP and the output head only; ModelError naming each field value the port does not
    implement."""
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
        return gpt2_style_config(
            hf_config,
            "gptj",
            tie_default=False,
            positions="rotary",
            rotary_dim=int(rotary_dim),
            rotary_pairs=True,
            residual="parallel",
            shared_norm=True,
            qkv_bias=False,
            o_bias=False,
            head_bias=True,
            f32_scores=True,
        )
