"""Llama and Mistral (``model_type`` llama, mistral): ``config`` reads a HF config into a LlamaLikeConfig; the
body, its parameters and their axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`).
``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import llama_like
from jaxassoc.models.llama.config import config_from_hf

FAMILY = llama_like.family("llama", config_from_hf, model_types={"llama": "llama", "mistral": "llama"})
