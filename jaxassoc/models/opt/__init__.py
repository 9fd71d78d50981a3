"""OPT (``model_type`` opt): ``config`` (OPTConfig), ``params`` (HF tensors -> module state), ``modeling``
(the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.opt.config import config_from_hf
from jaxassoc.models.opt.modeling import new_body
from jaxassoc.models.opt.params import params_from_hf
from jaxassoc.models.opt.sharding import AXES, units

FAMILY = Family(
    name="opt",
    model_types={"opt": "opt"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
