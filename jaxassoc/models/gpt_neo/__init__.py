"""GPT-Neo (``model_type`` gpt_neo): ``config`` (GPTNeoConfig), ``params`` (HF tensors -> module
state), ``modeling`` (the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what
:mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.gpt_neo.config import config_from_hf
from jaxassoc.models.gpt_neo.modeling import new_body
from jaxassoc.models.gpt_neo.params import params_from_hf
from jaxassoc.models.gpt_neo.sharding import AXES, units

FAMILY = Family(
    name="gpt_neo",
    model_types={"gpt_neo": "gpt_neo"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
