"""Llama and Mistral (``model_type`` llama, mistral): ``config`` (LlamaConfig), ``params`` (HF tensors ->
module state), ``modeling`` (the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama.config import config_from_hf
from jaxassoc.models.llama.modeling import new_body
from jaxassoc.models.llama.params import params_from_hf
from jaxassoc.models.llama.sharding import AXES, units

FAMILY = Family(
    name="llama",
    model_types={"llama": "llama", "mistral": "llama"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
