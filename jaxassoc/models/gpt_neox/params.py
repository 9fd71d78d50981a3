"""GPT-NeoX parameters from HF tensors: HF name -> module path (``nn.Linear`` weights transposed to ``(in,
out)``; the fused ``query_key_value`` keeps its per-head ``[q_h, k_h, v_h]`` output layout), shapes from the
abstract module, the head (``embed_out``, ``lm_head`` in some re-saved checkpoints) untied from ``embed_in``."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.gpt_neox.config import GPTNeoXConfig
from jaxassoc.models.gpt_neox.modeling import new_body

# Module path in GPTNeoXBlock -> HF name inside ``layers.<i>.``
_BLOCK = {
    "input_layernorm": "input_layernorm",
    "query_key_value": "attention.query_key_value",
    "dense": "attention.dense",
    "post_attention_layernorm": "post_attention_layernorm",
    "dense_h_to_4h": "mlp.dense_h_to_4h",
    "dense_4h_to_h": "mlp.dense_4h_to_h",
}
_HEADS = ("embed_out.weight", "lm_head.weight")


def params_from_hf(tensors: Mapping[str, np.ndarray], config: GPTNeoXConfig) -> dict:
    """``{"body", "head"}`` from HF GPT-NeoX tensors (``gpt_neox.`` prefix optional); the head is untied."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    L = config.num_hidden_layers
    # Older checkpoints carry the causal-mask and rotary buffers: no weights.
    buffers = tuple(f"layers.{i}.attention.{b}" for i in range(L) for b in ("bias", "masked_bias", "rotary_emb."))
    t = TensorTaker(tensors, prefixes=("gpt_neox.",), ignore=buffers, outside=("embed_out.", "lm_head."))
    body = {
        "embed_in": t.take("embed_in.weight", shapes["embed_in"]),
        "layers": {
            module: t.stacked(f"layers.{{}}.{hf}", L, shapes["layers"][module]) for module, hf in _BLOCK.items()
        },
        "final_layer_norm": t.module("final_layer_norm", shapes["final_layer_norm"]),
    }
    head_name = next((n for n in _HEADS if t.has(n)), None)
    if head_name is not None or not config.tie_word_embeddings:
        W = t.take(head_name or _HEADS[0], shapes["embed_in"])
    else:
        W = body["embed_in"]  # placing the params gives the head its own device buffer
    t.finish("GPT-NeoX")
    return {"body": body, "head": Head(W=W, b=None)}
