"""Qwen3 parameters from HF tensors: our stacked leaf -> HF name inside a layer (projections transposed to
``(in, out)``), expected shapes from the abstract module, the head untied from the embeddings (Qwen3-0.6B
ties them). Missing, unexpected or misshapen tensors raise one ModelError naming them."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.qwen3.config import MODEL_TYPE, Qwen3Config
from jaxassoc.models.qwen3.modeling import new_body

# Our stacked leaf -> (HF name inside a layer, transpose to (in, out)).
_LAYER_LEAVES = {
    "attn_norm": ("input_layernorm.weight", False),
    "q": ("self_attn.q_proj.weight", True),
    "k": ("self_attn.k_proj.weight", True),
    "v": ("self_attn.v_proj.weight", True),
    "q_norm": ("self_attn.q_norm.weight", False),
    "k_norm": ("self_attn.k_norm.weight", False),
    "o": ("self_attn.o_proj.weight", True),
    "mlp_norm": ("post_attention_layernorm.weight", False),
    "gate": ("mlp.gate_proj.weight", True),
    "up": ("mlp.up_proj.weight", True),
    "down": ("mlp.down_proj.weight", True),
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: Qwen3Config) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face tensors; the head is a separate copy even for tied checkpoints.
    ModelError naming missing, unexpected or misshapen tensors."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    take = TensorTaker(tensors, prefixes=("model.",), outside=("lm_head.",))
    layers = {
        leaf: take.stack(f"layers.{{}}.{name}", config.num_hidden_layers, shapes["layers"][leaf][1:], transpose)
        for leaf, (name, transpose) in _LAYER_LEAVES.items()
    }
    embed = take.take("embed_tokens.weight", shapes["embed"])
    norm = take.take("norm.weight", shapes["norm"])
    if take.has("lm_head.weight") or not config.tie_word_embeddings:
        head_W = take.take("lm_head.weight", shapes["embed"])
    else:
        head_W = embed  # untied: placing the params gives it its own device buffer
    take.finish(MODEL_TYPE)
    return {"body": {"embed": embed, "layers": layers, "norm": norm}, "head": Head(W=head_W, b=None)}
