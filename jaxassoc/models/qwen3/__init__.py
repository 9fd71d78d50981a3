"""Qwen3 (``model_type`` qwen3): ``config`` (Qwen3Config), ``params`` (HF tensors -> module state),
``modeling`` (the NNX body: Llama with per-head q/k RMSNorm), ``sharding`` (logical axes). ``FAMILY`` is
what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.qwen3.config import config_from_hf
from jaxassoc.models.qwen3.modeling import new_body
from jaxassoc.models.qwen3.params import params_from_hf
from jaxassoc.models.qwen3.sharding import AXES, units

FAMILY = Family(
    name="qwen3",
    model_types={"qwen3": "qwen3"},
    objective="causal",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
    axes=AXES,
    units=units,
)
