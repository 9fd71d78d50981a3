"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"; ``model_type`` gpt2):
``config`` reads a HF config into a GPTLikeConfig, ``params`` says where the checkpoint keeps each
parameter; the body and its axes are the GPT-like decoder's (:mod:`jaxassoc.models.gpt_like`). ``FAMILY`` is
what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models import gpt_like
from jaxassoc.models.gpt2.config import config_from_hf
from jaxassoc.models.gpt2.params import LAYOUT

FAMILY = gpt_like.family("gpt2", config_from_hf, LAYOUT)
