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
# Sub-module of a BertBlock -> HF name inside ``encoder.layer.<i>.``
_BLOCK = {
    ("attn", "q"): "attention.self.query",
    ("attn", "k"): "attention.self.key",
    ("attn", "v"): "attention.self.value",
    ("attn", "o"): "attention.output.dense",
    ("attn_norm",): "attention.output.LayerNorm",
    ("mlp", "up"): "intermediate.dense",
    ("mlp", "down"): "output.dense",
    ("mlp_norm",): "output.LayerNorm",
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: BertConfig) -> dict:
    """``{"body", "head"}`` from HF tensors of a ``*ForMaskedLM`` or ``*Model`` checkpoint.

    The decoder is untied (a copy of the word embeddings when the checkpoint ties them). Without an MLM
    head in the checkpoint, ``head`` is None and the body has no ``"mlm_transform"``.
    """
    c = config
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    V = c.vocab_size
    t = TensorTaker(tensors, prefixes=(f"{c.model_type}.",), ignore=_IGNORED, outside=("cls.", "lm_head."))

    layers: dict = {}
    for path, hf in _BLOCK.items():
        leaves = shapes["layers"][path[0]] if len(path) == 1 else shapes["layers"][path[0]][path[1]]
        parent = layers if len(path) == 1 else layers.setdefault(path[0], {})
        parent[path[-1]] = t.stacked(f"encoder.layer.{{}}.{hf}", c.num_layers, leaves)
    body = {
        "embed": t.take("embeddings.word_embeddings.weight", shapes["embed"]),
        "positions": t.take("embeddings.position_embeddings.weight", shapes["positions"]),
        "token_type": t.take("embeddings.token_type_embeddings.weight", shapes["token_type"]),
        "embed_norm": t.module("embeddings.LayerNorm", shapes["embed_norm"]),
        "layers": layers,
    }
    names = _mlm_names(c.model_type)
    head = None
    if any(k.startswith(names["head"]) for k in t.tensors):
        mlm = shapes["mlm_transform"]
        body["mlm_transform"] = {
            "dense": t.module(names["dense"], mlm["dense"]),
            "norm": t.module(names["ln"], mlm["norm"]),
        }
        W = t.head(body["embed"], c.tie_word_embeddings, (names["decoder"] + ".weight",))
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
