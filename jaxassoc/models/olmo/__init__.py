"""OLMo (``model_type`` olmo, the ``-hf`` checkpoints): ``config`` (OlmoConfig), ``params`` (HF tensors ->
module state), ``modeling`` (the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what
:mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.olmo.config import config_from_hf
from jaxassoc.models.olmo.modeling import new_body
from jaxassoc.models.olmo.params import params_from_hf
from jaxassoc.models.olmo.sharding import AXES, units

FAMILY = Family(
    name="olmo",
    model_types={"olmo": "olmo"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
