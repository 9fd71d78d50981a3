"""GPT-2 (``model_type`` gpt2): ``config`` (GPT2Config), ``params`` (HF tensors -> module state),
``modeling`` (the NNX body), ``sharding`` (logical axes). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.gpt2.config import config_from_hf
from jaxassoc.models.gpt2.modeling import new_body
from jaxassoc.models.gpt2.params import params_from_hf
from jaxassoc.models.gpt2.sharding import AXES, units

FAMILY = Family(
    name="gpt2",
    model_types={"gpt2": "gpt2"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
