"""Gemma 3 text (``model_type`` gemma3_text; Gemma Team 2025): ``config`` reads a HF config into a
LlamaLikeConfig with Gemma 2's flags plus (1 + w) RMSNorm of each query and key head, no attention
soft-capping, and the local layers' own rotary base (``rope_local_theta``; global layers: ``rope_theta``,
positions divided by ``rope_linear_factor``); the body, its parameters and their axes are the llama-like
decoder's (:mod:`jaxassoc.models.llama_like`). The multimodal ``gemma3`` wrapper is not registered: loading
one is refused with the supported types, gemma3_text among them."""

from jaxassoc.models.family import Family
from jaxassoc.models.gemma3.config import config_from_hf
from jaxassoc.models.llama_like import AXES, new_body, params_from_hf, units

FAMILY = Family(
    name="gemma3",
    model_types={"gemma3_text": "gemma3"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
