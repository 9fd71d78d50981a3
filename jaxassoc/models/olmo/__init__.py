"""OLMo (``model_type`` olmo, the ``-hf`` checkpoints; Groeneveld et al. 2024): ``config`` reads a HF config
into a LlamaLikeConfig with OLMo's parameter-free LayerNorm (``norm="layer"``) and ``clip_qkv``; the body, its
parameters and their axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`). ``FAMILY`` is
what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama_like import AXES, new_body, params_from_hf, units
from jaxassoc.models.olmo.config import config_from_hf

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
