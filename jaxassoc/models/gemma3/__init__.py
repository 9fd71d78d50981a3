"""Gemma 3 text (``model_type`` gemma3_text; Gemma Team 2025): ``config`` reads a HF config into a
LlamaLikeConfig with Gemma 2's flags plus (1 + w) RMSNorm of each query and key head, no attention
soft-capping, and the local layers' own rotary base (``rope_local_theta``; global layers: ``rope_theta``,
linear ``rope_scaling``); the body, its parameters and their axes are the llama-like
decoder's (:mod:`jaxassoc.models.llama_like`). The multimodal ``gemma3`` wrapper is not registered: loading
one is refused with the supported types, gemma3_text among them."""

from jaxassoc.models import llama_like
from jaxassoc.models.gemma3.config import config_from_hf

FAMILY = llama_like.family("gemma3", config_from_hf, model_types={"gemma3_text": "gemma3"})
