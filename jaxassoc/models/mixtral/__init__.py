"""Mixtral (``model_type`` mixtral; Jiang et al. 2024, "Mixtral of Experts"): ``config`` reads a HF config into
a LlamaLikeConfig, Mistral's attention with a mixture of SwiGLU experts (:class:`jaxassoc.models.mlp.MoE`) in
place of the MLP; the body, its parameters (hub or fused expert layout) and their axes are the llama-like
decoder's (:mod:`jaxassoc.models.llama_like`). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama_like import MOE_AXES, new_body, params_from_hf, units
from jaxassoc.models.mixtral.config import config_from_hf

FAMILY = Family(
    name="mixtral",
    model_types={"mixtral": "mixtral"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=MOE_AXES,
    units=units,
)
