"""Gemma 3 text (``model_type`` gemma3_text): ``config`` (Gemma3Config), ``params`` (HF tensors -> module
state), ``modeling`` (the NNX body, built on Gemma 2's), ``sharding`` (logical axes). The multimodal
``gemma3`` wrapper is not registered: loading one is refused with the supported types, gemma3_text among them."""

from jaxassoc.models.family import Family
from jaxassoc.models.gemma3.config import config_from_hf
from jaxassoc.models.gemma3.modeling import new_body
from jaxassoc.models.gemma3.params import params_from_hf
from jaxassoc.models.gemma3.sharding import AXES, units

FAMILY = Family(
    name="gemma3",
    model_types={"gemma3_text": "gemma3"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
