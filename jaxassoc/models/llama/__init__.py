"""Llama and Mistral (``model_type`` llama, mistral): ``config`` reads a HF config into a LlamaLikeConfig; the
body, its parameters and their axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`).
``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.llama.config import config_from_hf
from jaxassoc.models.llama_like import AXES, new_body, params_from_hf, units

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
