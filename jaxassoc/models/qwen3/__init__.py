"""Qwen3 (``model_type`` qwen3): ``config`` reads a HF config into a LlamaLikeConfig (``qk_norm``: per-head q/k
RMSNorm); the body, its parameters and their axes are the llama-like decoder's
(:mod:`jaxassoc.models.llama_like`). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import llama_like
from jaxassoc.models.qwen3.config import config_from_hf

FAMILY = llama_like.family("qwen3", config_from_hf)
