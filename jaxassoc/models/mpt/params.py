"""MPT's parameters from HF tensors: HF name -> module path, projections transposed to ``(in, out)``, layers
stacked lazily, shapes from the abstract module, the head untied from the word embeddings."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.mpt.config import MptConfig
from jaxassoc.models.mpt.modeling import new_body

# Our stacked leaf -> (HF name inside ``blocks.<i>.``, transpose to (in, out))
_BLOCK = {
    "norm_1": ("norm_1.weight", False),
    "wqkv": ("attn.Wqkv.weight", True),
    "out": ("attn.out_proj.weight", True),
    "norm_2": ("norm_2.weight", False),
    "up": ("ffn.up_proj.weight", True),
    "down": ("ffn.down_proj.weight", True),
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: MptConfig) -> dict:
    """``{"body", "head"}`` from HF MPT tensors (``transformer.`` prefix optional); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    t = TensorTaker(tensors, prefixes=("transformer.",), outside=("lm_head.",))
    body = {
        "wte": t.take("wte.weight", shapes["wte"]),
        "blocks": {
            leaf: t.stack(f"blocks.{{}}.{hf}", config.n_layers, shapes["blocks"][leaf][1:], transpose)
            for leaf, (hf, transpose) in _BLOCK.items()
        },
        "norm_f": t.take("norm_f.weight", shapes["norm_f"]),
    }
    # The head is untied: its own lm_head if the checkpoint has one, else a copy of wte.
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["wte"])
    else:
        W = body["wte"]  # placing the params gives the head its own device buffer
    t.finish("MPT")
    return {"body": body, "head": Head(W=W, b=None)}
