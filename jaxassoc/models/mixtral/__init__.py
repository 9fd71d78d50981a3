"""Mixtral (``model_type`` mixtral): ``config`` (MixtralConfig), ``params`` (HF tensors, hub or fused expert
layout -> module state), ``modeling`` (the NNX body, dense top-k mixture of experts), ``sharding`` (logical
axes). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.mixtral.config import config_from_hf
from jaxassoc.models.mixtral.modeling import new_body
from jaxassoc.models.mixtral.params import params_from_hf
from jaxassoc.models.mixtral.sharding import AXES, units

FAMILY = Family(
    name="mixtral",
    model_types={"mixtral": "mixtral"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
