"""BERT and RoBERTa (``model_type`` bert, roberta): ``config`` (BertConfig), ``params`` (HF tensors ->
module state), ``modeling`` (the NNX body, its parameters' logical axes declared where they are made). ``FAMILY`` is what :mod:`jaxassoc.models.family` registers."""

from jaxassoc.models.bert.config import config_from_hf
from jaxassoc.models.bert.modeling import new_body
from jaxassoc.models.bert.params import params_from_hf
from jaxassoc.models.family import Family

FAMILY = Family(
    name="bert",
    model_types={"bert": "bert", "roberta": "roberta"},
    objective="masked",
    config_from_hf=config_from_hf,
    params_from_hf=params_from_hf,
    new_body=new_body,
)
