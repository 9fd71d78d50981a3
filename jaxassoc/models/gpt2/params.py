"""GPT-2's parameters from HF tensors: HF name -> module path (HF ``Conv1D`` weights are already ``(in,
out)``), shapes from the abstract module (``nnx.eval_shape``), the head untied from ``wte``."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.gpt2.config import GPT2Config
from jaxassoc.models.gpt2.modeling import new_body

# Module path in GPT2Block -> HF name inside ``h.<i>.``
_BLOCK = {
    "ln_1": "ln_1",
    "c_attn": "attn.c_attn",
    "c_proj": "attn.c_proj",
    "ln_2": "ln_2",
    "c_fc": "mlp.c_fc",
    "mlp_proj": "mlp.c_proj",
}
_LEAF = {"scale": "weight", "bias": "bias", "w": "weight", "b": "bias"}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: GPT2Config) -> dict:
    """``{"body", "head"}`` from HF GPT-2 tensors (``transformer.`` prefix optional); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    L = config.n_layer
    # Older checkpoints carry the causal-mask buffers attn.bias / attn.masked_bias: no weights.
    buffers = tuple(f"h.{i}.attn.{b}" for i in range(L) for b in ("bias", "masked_bias"))
    t = TensorTaker(tensors, prefixes=("transformer.",), ignore=buffers, outside=("lm_head.",))
    body = {
        "wte": t.take("wte.weight", shapes["wte"]),
        "wpe": t.take("wpe.weight", shapes["wpe"]),
        "blocks": {
            module: {
                leaf: t.stack(f"h.{{}}.{hf}.{_LEAF[leaf]}", L, shape[1:])
                for leaf, shape in shapes["blocks"][module].items()
            }
            for module, hf in _BLOCK.items()
        },
        "ln_f": {leaf: t.take(f"ln_f.{_LEAF[leaf]}", shape) for leaf, shape in shapes["ln_f"].items()},
    }
    # The head is untied: its own lm_head if the checkpoint has one, else a copy of wte.
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["wte"])
    else:
        W = body["wte"]  # placing the params gives the head its own device buffer
    t.finish("GPT-2")
    return {"body": body, "head": Head(W=W, b=None)}
