"""T5 encoder-decoder (``model_type`` t5: T5 v1.1 and the original T5): ``config`` (T5Config), ``params``
(HF tensors -> module state), ``modeling`` (the NNX body: ``__call__`` is the encoder, ``decode`` the
teacher-forced decoder; its parameters' logical axes declared where they are made). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.family import Family
from jaxassoc.models.t5.config import config_from_hf
from jaxassoc.models.t5.modeling import new_body
from jaxassoc.models.t5.params import params_from_hf

FAMILY = Family(
    name="t5",
    model_types={"t5": "t5"},
    objective="seq2seq",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
)
