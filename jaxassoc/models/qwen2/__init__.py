"""Qwen2 / Qwen2.5 (``model_type`` qwen2): the llama body with query/key/value biases and a sliding window
on some layers. ``config`` reads the HF config into a ``LlamaLikeConfig``; the body, its parameters and
their axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`)."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama_like import AXES, new_body, params_from_hf, units
from jaxassoc.models.qwen2.config import config_from_hf

FAMILY = Family(
    name="qwen2",
    model_types={"qwen2": "qwen2"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
