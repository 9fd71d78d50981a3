"""GPT-J (``model_type`` gptj): ``config`` (GPTJConfig), ``params`` (HF tensors -> module
state), ``modeling`` (the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what
:mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.gptj.config import config_from_hf
from jaxassoc.models.gptj.modeling import new_body
from jaxassoc.models.gptj.params import params_from_hf
from jaxassoc.models.gptj.sharding import AXES, units

FAMILY = Family(
    name="gptj",
    model_types={"gptj": "gptj"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
