"""Gemma 2 (``model_type`` gemma2; Gemma Team 2024): ``config`` reads a HF config into a LlamaLikeConfig with
Gemma's flags ((1 + w) RMSNorm before and after both sublayers, embeddings scaled by sqrt(d_model), scores
scaled by ``query_pre_attn_scalar^-1/2`` and soft-capped, GeGLU, alternating local layers, the head's
logit soft-cap); the body, its parameters and their axes are the llama-like decoder's
(:mod:`jaxassoc.models.llama_like`)."""

from jaxassoc.models import llama_like
from jaxassoc.models.gemma2.config import config_from_hf

FAMILY = llama_like.family("gemma2", config_from_hf)
