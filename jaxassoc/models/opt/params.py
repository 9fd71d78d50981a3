"""OPT's parameters from HF tensors: HF name -> module path, projections transposed to ``(in, out)``, layers
stacked lazily, shapes from the abstract module, the head untied from the word embeddings."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.opt.config import OPTConfig
from jaxassoc.models.opt.modeling import new_body

# Module path in OPTBlock -> HF name inside ``layers.<i>.``
_BLOCK = {
    "attn_ln": "self_attn_layer_norm",
    "q": "self_attn.q_proj",
    "k": "self_attn.k_proj",
    "v": "self_attn.v_proj",
    "o": "self_attn.out_proj",
    "mlp_ln": "final_layer_norm",
    "fc1": "fc1",
    "fc2": "fc2",
}
# Our leaf -> (HF leaf, transpose to (in, out))


def params_from_hf(tensors: Mapping[str, np.ndarray], config: OPTConfig) -> dict:
    """``{"body", "head"}`` from HF OPT tensors (``model.decoder.`` or ``decoder.`` prefix); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    L = config.num_hidden_layers
    t = TensorTaker(tensors, prefixes=("model.decoder.", "decoder."), outside=("lm_head.",))
    body = {
        "embed": t.take("embed_tokens.weight", shapes["embed"]),
        "positions": t.take("embed_positions.weight", shapes["positions"]),
        "layers": {
            module: t.stacked(f"layers.{{}}.{hf}", L, shapes["layers"][module]) for module, hf in _BLOCK.items()
        },
    }
    if config.projected:
        body["project_in"] = t.take("project_in.weight", shapes["project_in"], transpose=True)
        body["project_out"] = t.take("project_out.weight", shapes["project_out"], transpose=True)
    if config.final_layer_norm:
        body["final_ln"] = t.module("final_layer_norm", shapes["final_ln"])
    # The head is untied: its own lm_head if the checkpoint has one, else a copy of the word embeddings.
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["embed"])
    else:
        W = body["embed"]  # placing the params gives the head its own device buffer
    t.finish("OPT")
    return {"body": body, "head": Head(W=W, b=None)}
