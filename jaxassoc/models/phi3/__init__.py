"""Phi-3 (``model_type`` phi3; Phi-3-mini-4k): the llama body with a sliding window on every layer, read from
checkpoints with fused query/key/value and gate/up projections (``params`` splits them). The body and its
axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`)."""

from jaxassoc.models import llama_like
from jaxassoc.models.phi3.config import config_from_hf
from jaxassoc.models.phi3.params import params_from_hf

FAMILY = llama_like.family("phi3", config_from_hf, params=params_from_hf)
