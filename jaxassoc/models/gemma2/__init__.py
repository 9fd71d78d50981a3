"""Gemma 2 (``model_type`` gemma2): ``config`` (Gemma2Config), ``params`` (HF tensors -> module state, the
head with the final logit soft-cap), ``modeling`` (the NNX body), ``sharding`` (logical axes)."""

from jaxassoc.models.family import Family
from jaxassoc.models.gemma2.config import config_from_hf
from jaxassoc.models.gemma2.modeling import new_body
from jaxassoc.models.gemma2.params import params_from_hf
from jaxassoc.models.gemma2.sharding import AXES, units

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
