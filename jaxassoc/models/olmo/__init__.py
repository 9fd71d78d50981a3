"""OLMo (``model_type`` olmo, the ``-hf`` checkpoints; Groeneveld et al. 2024): ``config`` reads a HF config
into a LlamaLikeConfig with OLMo's parameter-free LayerNorm (``norm="layer"``) and ``clip_qkv``; the body, its
parameters and their axes are the llama-like decoder's (:mod:`jaxassoc.models.llama_like`). ``FAMILY`` is
what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import llama_like
from jaxassoc.models.olmo.config import config_from_hf

FAMILY = llama_like.family("olmo", config_from_hf)
