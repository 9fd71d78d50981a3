"""GPT-Neo (Black et al. 2021; ``model_type`` gpt_neo): ``config`` reads a HF config into a GPTLikeConfig,
``params`` says where the checkpoint keeps each parameter; the body and its axes are the GPT-like decoder's
(:mod:`jaxassoc.models.gpt_like`). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import gpt_like
from jaxassoc.models.gpt_neo.config import config_from_hf
from jaxassoc.models.gpt_neo.params import LAYOUT

FAMILY = gpt_like.family("gpt_neo", config_from_hf, LAYOUT)
