"""Qwen3 (``model_type`` qwen3): ``config`` reads a HF config into a LlamaLikeConfig (``qk_norm``: per-head q/k
RMSNorm); the body, its parameters and their axes are the llama-like decoder's
(:mod:`jaxassoc.models.llama_like`). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama_like import AXES, new_body, params_from_hf, units
from jaxassoc.models.qwen3.config import config_from_hf

FAMILY = Family(
    name="qwen3",
    model_types={"qwen3": "qwen3"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
