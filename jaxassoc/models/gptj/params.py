"""GPT-J parameters from HF tensors: HF name -> module path (``nn.Linear`` weights transposed to ``(in,
out)``), shapes from the abstract module, the head ``lm_head`` (weight and bias) untied from ``wte``."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.gptj.config import GPTJConfig
from jaxassoc.models.gptj.modeling import new_body

# Module path in GPTJBlock -> HF name inside ``h.<i>.``; a plain matrix is an nn.Linear without bias.
_BLOCK = {
    "ln_1": "ln_1",
    "q_proj": "attn.q_proj",
    "k_proj": "attn.k_proj",
    "v_proj": "attn.v_proj",
    "out_proj": "attn.out_proj",
    "fc_in": "mlp.fc_in",
    "fc_out": "mlp.fc_out",
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: GPTJConfig) -> dict:
    """``{"body", "head"}`` from HF GPT-J tensors (``transformer.`` prefix optional); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    L = config.n_layer
    # Older checkpoints carry the causal-mask buffers attn.bias / attn.masked_bias: no weights.
    buffers = tuple(f"h.{i}.attn.{b}" for i in range(L) for b in ("bias", "masked_bias"))
    t = TensorTaker(tensors, prefixes=("transformer.",), ignore=buffers, outside=("lm_head.",))

    body = {
        "wte": t.take("wte.weight", shapes["wte"]),
        "h": {module: t.stacked(f"h.{{}}.{hf}", L, shapes["h"][module]) for module, hf in _BLOCK.items()},
        "ln_f": t.module("ln_f", shapes["ln_f"]),
    }
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["wte"])
    else:
        W = body["wte"]  # placing the params gives the head its own device buffer
    b = t.take("lm_head.bias", shapes["wte"][:1])
    t.finish("GPT-J")
    return {"body": body, "head": Head(W=W, b=b)}
