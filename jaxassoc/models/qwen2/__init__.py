"""Qwen2 / Qwen2.5 (``model_type`` qwen2): the llama body with query/key/value biases and a sliding window
on some layers. ``config`` reads the HF config into a llama ``LlamaConfig``; parameters, modeling and
sharding are the llama family's (``jaxassoc.models.llama``)."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama.modeling import new_body
from jaxassoc.models.llama.params import params_from_hf
from jaxassoc.models.qwen2.config import config_from_hf
from jaxassoc.models.qwen2.sharding import AXES, units

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
