"""GPT-Neo parameters from HF tensors: HF name -> module path (``nn.Linear`` weights transposed to ``(in,
out)``), shapes from the abstract module, the head (tied to ``wte`` unless the checkpoint has
``lm_head.weight``) untied from ``wte``."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.gpt_neo.config import GPTNeoConfig
from jaxassoc.models.gpt_neo.modeling import new_body

# Module path in GPTNeoBlock -> HF name inside ``h.<i>.``; a plain matrix is an nn.Linear without bias.
_BLOCK = {
    "ln_1": "ln_1",
    "q_proj": "attn.attention.q_proj",
    "k_proj": "attn.attention.k_proj",
    "v_proj": "attn.attention.v_proj",
    "out_proj": "attn.attention.out_proj",
    "ln_2": "ln_2",
    "c_fc": "mlp.c_fc",
    "c_proj": "mlp.c_proj",
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: GPTNeoConfig) -> dict:
    """``{"body", "head"}`` from HF GPT-Neo tensors (``transformer.`` prefix optional); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    L = config.num_layers
    # Older checkpoints carry the (local) causal-mask buffers attn.attention.bias / masked_bias: no weights.
    buffers = tuple(f"h.{i}.attn.attention.{b}" for i in range(L) for b in ("bias", "masked_bias"))
    t = TensorTaker(tensors, prefixes=("transformer.",), ignore=buffers, outside=("lm_head.",))

    body = {
        "wte": t.take("wte.weight", shapes["wte"]),
        "wpe": t.take("wpe.weight", shapes["wpe"]),
        "h": {module: t.stacked(f"h.{{}}.{hf}", L, shapes["h"][module]) for module, hf in _BLOCK.items()},
        "ln_f": t.module("ln_f", shapes["ln_f"]),
    }
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["wte"])
    else:
        W = body["wte"]  # placing the params gives the head its own device buffer
    t.finish("GPT-Neo")
    return {"body": body, "head": Head(W=W, b=None)}
