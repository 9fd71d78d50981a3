"""Mixtral (``model_type`` mixtral; Jiang et al. 2024, "Mixtral of Experts"): ``config`` reads a HF config into
a LlamaLikeConfig, Mistral's attention with a mixture of SwiGLU experts (:class:`jaxassoc.models.mlp.MoE`) in
place of the MLP; the body, its parameters (hub or fused expert layout) and their axes are the llama-like
decoder's (:mod:`jaxassoc.models.llama_like`). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import llama_like
from jaxassoc.models.mixtral.config import config_from_hf

FAMILY = llama_like.family("mixtral", config_from_hf)
