"""BERT / RoBERTa parameters from HF tensors (``*ForMaskedLM`` or ``*Model``): HF name -> module path,
``nn.Linear`` weights transposed to ``(in, out)``, shapes from the abstract module (``nnx.eval_shape``), the
decoder untied from the word embeddings."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.bert.config import BertConfig
from jaxassoc.models.bert.modeling import new_body
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes

# Tensors this port deliberately leaves out: pooler, next-sentence head, position-id buffers.
_IGNORED = ("pooler.", "cls.seq_relationship.", "embeddings.position_ids", "embeddings.token_type_ids")
# Module path in BertBlock -> HF name inside ``encoder.layer.<i>.``; leaf -> HF suffix.
_BLOCK = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attn_out": "attention.output.dense",
    "attn_ln": "attention.output.LayerNorm",
    "ffn_in": "intermediate.dense",
    "ffn_out": "output.dense",
    "ffn_ln": "output.LayerNorm",
}
_LEAF = {"scale": "weight", "bias": "bias", "w": "weight", "b": "bias"}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: BertConfig) -> dict:
    """``{"body", "head"}`` from HF tensors of a ``*ForMaskedLM`` or ``*Model`` checkpoint.

    The decoder is untied (a copy of the word embeddings when the checkpoint ties them). Without an MLM
    head in the checkpoint, ``head`` is None and the body has no ``"mlm_transform"``.
    """
    c = config
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    D, V = c.hidden_size, c.vocab_size
    t = TensorTaker(tensors, prefixes=(f"{c.model_type}.",), ignore=_IGNORED, outside=("cls.", "lm_head."))

    def module(hf: str, leaves: dict, stacked: bool = False) -> dict:  # nn.Linear weights are (out, in)
        if stacked:
            return {
                leaf: t.stack(f"encoder.layer.{{}}.{hf}.{_LEAF[leaf]}", c.num_layers, shape[1:], transpose=leaf == "w")
                for leaf, shape in leaves.items()
            }
        return {leaf: t.take(f"{hf}.{_LEAF[leaf]}", shape, transpose=leaf == "w") for leaf, shape in leaves.items()}

    body = {
        "word": t.take("embeddings.word_embeddings.weight", shapes["word"]),
        "position": t.take("embeddings.position_embeddings.weight", shapes["position"]),
        "token_type": t.take("embeddings.token_type_embeddings.weight", shapes["token_type"]),
        "embed_ln": module("embeddings.LayerNorm", shapes["embed_ln"]),
        "blocks": {name: module(hf, shapes["blocks"][name], stacked=True) for name, hf in _BLOCK.items()},
    }
    names = _mlm_names(c.model_type)
    head = None
    if any(k.startswith(names["head"]) for k in t.tensors):
        mlm = shapes["mlm_transform"]
        body["mlm_transform"] = {"dense": module(names["dense"], mlm["dense"]), "ln": module(names["ln"], mlm["ln"])}
        decoder = names["decoder"] + ".weight"
        W = t.take(decoder, (V, D)) if t.has(decoder) or not c.tie_word_embeddings else body["word"]
        # HF applies ``decoder.bias``; tied checkpoints may store only the shared ``bias`` it is tied to,
        # old ones store both (equal), untied transformers-5 ones both (only ``decoder.bias`` is used).
        biases = [t.take(n, (V,)) for n in (names["decoder"] + ".bias", names["bias"]) if t.has(n)]
        b = biases[0] if biases else t.take(names["bias"], (V,))
        head = Head(W=W, b=b)  # placing the params gives the head its own device buffer
    t.finish(c.model_type)
    return {"body": body, "head": head}


def _mlm_names(model_type: str) -> dict[str, str]:
    if model_type == "roberta":
        return {
            "head": "lm_head.",
            "dense": "lm_head.dense",
            "ln": "lm_head.layer_norm",
            "decoder": "lm_head.decoder",
            "bias": "lm_head.bias",
        }
    return {
        "head": "cls.predictions.",
        "dense": "cls.predictions.transform.dense",
        "ln": "cls.predictions.transform.LayerNorm",
        "decoder": "cls.predictions.decoder",
        "bias": "cls.predictions.bias",
    }
