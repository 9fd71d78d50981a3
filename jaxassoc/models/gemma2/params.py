"""Gemma 2 parameters from HF tensors: our stacked leaf -> HF name inside a layer (projections transposed
to ``(in, out)``), shapes from the abstract module, the head untied from the embeddings and carrying the
final logit soft-cap. Missing, unexpected or misshapen tensors raise one ModelError naming them."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.gemma2.config import Gemma2Config
from jaxassoc.models.gemma2.modeling import new_body

# Our stacked leaf -> (HF name inside ``layers.<i>.``, transpose to (in, out)).
LAYER_LEAVES = {
    "attn_norm": ("input_layernorm.weight", False),
    "q": ("self_attn.q_proj.weight", True),
    "k": ("self_attn.k_proj.weight", True),
    "v": ("self_attn.v_proj.weight", True),
    "o": ("self_attn.o_proj.weight", True),
    "post_attn_norm": ("post_attention_layernorm.weight", False),
    "mlp_norm": ("pre_feedforward_layernorm.weight", False),
    "gate": ("mlp.gate_proj.weight", True),
    "up": ("mlp.up_proj.weight", True),
    "down": ("mlp.down_proj.weight", True),
    "post_mlp_norm": ("post_feedforward_layernorm.weight", False),
}


def read_params(
    tensors: Mapping[str, np.ndarray],
    config: Any,
    leaves: Mapping[str, tuple[str, bool]],
    body_of: Callable[[Any], nnx.Module],
    what: str,
) -> dict[str, Any]:
    """``{"body", "head"}`` of a Gemma-layout checkpoint (``model.`` prefix, ``lm_head.weight`` or tied)."""
    shapes = param_shapes(nnx.eval_shape(lambda: body_of(config)))
    L = config.num_hidden_layers
    t = TensorTaker(tensors, prefixes=("model.",), outside=("lm_head.",))
    layers = {
        leaf: t.stack(f"layers.{{}}.{name}", L, shapes["layers"][leaf][1:], transpose)
        for leaf, (name, transpose) in leaves.items()
    }
    body = {
        "embed": t.take("embed_tokens.weight", shapes["embed"]),
        "layers": layers,
        "norm": t.take("norm.weight", shapes["norm"]),
    }
    if t.has("lm_head.weight") or not config.tie_word_embeddings:
        W = t.take("lm_head.weight", shapes["embed"])
    else:
        W = body["embed"]  # placing the params gives the head its own device buffer
    t.finish(what)
    return {"body": body, "head": Head(W=W, b=None, softcap=config.final_logit_softcapping)}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: Gemma2Config) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face Gemma 2 tensors; ModelError naming bad tensors."""
    return read_params(tensors, config, LAYER_LEAVES, new_body, "Gemma 2")
