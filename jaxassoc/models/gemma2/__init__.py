"""Gemma 2 (``model_type`` gemma2; Gemma Team 2024): ``config`` reads a HF config into a LlamaLikeConfig with
Gemma's flags ((1 + w) RMSNorm before and after both sublayers, embeddings scaled by sqrt(d_model), scores
scaled by ``query_pre_attn_scalar^-1/2`` and soft-capped, GeGLU, alternating local layers, the head's
logit soft-cap); the body, its parameters and their axes are the llama-like decoder's
(:mod:`jaxassoc.models.llama_like`)."""

from jaxassoc.models.family import Family
from jaxassoc.models.gemma2.config import config_from_hf
from jaxassoc.models.llama_like import AXES, new_body, params_from_hf, units

FAMILY = Family(
    name="gemma2",
    model_types={"gemma2": "gemma2"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
