"""MPT (MosaicML 2023; ``model_type`` mpt): ``config`` reads a HF config into a GPTLikeConfig,
``params`` says where the checkpoint keeps each parameter; the body and its axes are the GPT-like decoder's
(:mod:`jaxassoc.models.gpt_like`). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import gpt_like
from jaxassoc.models.mpt.config import config_from_hf
from jaxassoc.models.mpt.params import LAYOUT

FAMILY = gpt_like.family("mpt", config_from_hf, LAYOUT)
