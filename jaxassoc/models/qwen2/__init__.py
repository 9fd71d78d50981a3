"""Qwen2 / Qwen2.5 (``model_type`` qwen2): the llama body with query/key/value biases and a sliding window
on some layers. ``config`` reads the HF config into a ``LlamaLikeConfig``; the body, its parameters and
their axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`)."""

from jaxassoc.models import llama_like
from jaxassoc.models.qwen2.config import config_from_hf

FAMILY = llama_like.family("qwen2", config_from_hf)
