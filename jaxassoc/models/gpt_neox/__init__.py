"""GPT-NeoX / Pythia (``model_type`` gpt_neox): ``config`` (GPTNeoXConfig), ``params`` (HF tensors -> module
state), ``modeling`` (the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what
:mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.gpt_neox.config import config_from_hf
from jaxassoc.models.gpt_neox.modeling import new_body
from jaxassoc.models.gpt_neox.params import params_from_hf
from jaxassoc.models.gpt_neox.sharding import AXES, units

FAMILY = Family(
    name="gpt_neox",
    model_types={"gpt_neox": "gpt_neox"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
