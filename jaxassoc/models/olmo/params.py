"""OLMo's parameters from HF tensors: HF name -> module path, projections transposed to ``(in, out)``, layers
stacked lazily, shapes from the abstract module, the head untied from the embeddings (the LayerNorms have
no parameters)."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.olmo.config import OlmoConfig
from jaxassoc.models.olmo.modeling import new_body

# Our stacked leaf -> HF name inside ``layers.<i>.`` (every one transposed to (in, out))
_LAYER = {
    "q": "self_attn.q_proj.weight",
    "k": "self_attn.k_proj.weight",
    "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight",
    "gate": "mlp.gate_proj.weight",
    "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: OlmoConfig) -> dict:
    """``{"body", "head"}`` from HF OLMo tensors (``model.`` prefix); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    L = config.num_hidden_layers
    # Older checkpoints carry the rotary buffers self_attn.rotary_emb.inv_freq: no weights.
    buffers = tuple(f"layers.{i}.self_attn.rotary_emb." for i in range(L))
    t = TensorTaker(tensors, prefixes=("model.",), ignore=buffers, outside=("lm_head.",))
    body = {
        "embed": t.take("embed_tokens.weight", shapes["embed"]),
        "layers": {
            leaf: t.stack(f"layers.{{}}.{hf}", L, shapes["layers"][leaf][1:], True) for leaf, hf in _LAYER.items()
        },
    }
    # The head is untied: its own lm_head if the checkpoint has one, else a copy of the embeddings.
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["embed"])
    else:
        W = body["embed"]  # placing the params gives the head its own device buffer
    t.finish("OLMo")
    return {"body": body, "head": Head(W=W, b=None)}
