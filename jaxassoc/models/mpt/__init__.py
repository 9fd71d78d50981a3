"""MPT (``model_type`` mpt): ``config`` (MptConfig), ``params`` (HF tensors -> module state), ``modeling``
(the NNX body with ALiBi), ``sharding`` (logical axes). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.mpt.config import config_from_hf
from jaxassoc.models.mpt.modeling import new_body
from jaxassoc.models.mpt.params import params_from_hf
from jaxassoc.models.mpt.sharding import AXES, units

FAMILY = Family(
    name="mpt",
    model_types={"mpt": "mpt"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
