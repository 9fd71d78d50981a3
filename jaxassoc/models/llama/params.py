"""Llama / Mistral parameters from HF tensors: our stacked leaf -> HF name inside a layer (projections
transposed to ``(in, out)``), expected shapes from the abstract module, the head untied from the embeddings.
Missing, unexpected or misshapen tensors raise one ModelError naming them."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from flax import nnx

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import LayerStack
from jaxassoc.models.family import param_shapes
from jaxassoc.models.llama.config import LlamaConfig
from jaxassoc.models.llama.modeling import new_body

# Our stacked leaf -> (HF name inside a layer, transpose to (in, out)).
_LAYER_LEAVES = {
    "attn_norm": ("input_layernorm.weight", False),
    "q": ("self_attn.q_proj.weight", True),
    "k": ("self_attn.k_proj.weight", True),
    "v": ("self_attn.v_proj.weight", True),
    "o": ("self_attn.o_proj.weight", True),
    "mlp_norm": ("post_attention_layernorm.weight", False),
    "gate": ("mlp.gate_proj.weight", True),
    "up": ("mlp.up_proj.weight", True),
    "down": ("mlp.down_proj.weight", True),
}
_BIAS_LEAVES = {
    "q_bias": ("self_attn.q_proj.bias", False),
    "k_bias": ("self_attn.k_proj.bias", False),
    "v_bias": ("self_attn.v_proj.bias", False),
}


def _layer_leaves(config: LlamaConfig) -> dict[str, tuple[str, bool]]:
    return {**_LAYER_LEAVES, **(_BIAS_LEAVES if config.qkv_bias else {})}


def _expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    """HF tensor name -> shape, from the abstract module's parameter shapes (``nnx.eval_shape``)."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    layer = {
        name: shapes["layers"][leaf][1:][::-1] if transpose else shapes["layers"][leaf][1:]
        for leaf, (name, transpose) in _layer_leaves(config).items()
    }
    expected = {
        "model.embed_tokens.weight": shapes["embed"],
        "model.norm.weight": shapes["norm"],
        "lm_head.weight": shapes["embed"],
    }
    for i in range(config.num_hidden_layers):
        expected.update({f"model.layers.{i}.{name}": shape for name, shape in layer.items()})
    return expected


def params_from_hf(tensors: Mapping[str, np.ndarray], config: LlamaConfig) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face tensors; the head is a separate copy even for tied checkpoints.

    Layer weights are stacked on a leading layer axis, projections stored as ``(in, out)`` matrices.
    Missing, unexpected or misshapen tensors raise ModelError naming them.
    """
    tensors = {k: v for k, v in tensors.items() if not k.endswith("rotary_emb.inv_freq")}  # old checkpoints
    expected = _expected_shapes(config)
    if "lm_head.weight" not in tensors:
        if not config.tie_word_embeddings:
            raise ModelError("checkpoint has no lm_head.weight and tie_word_embeddings is false: the head is missing")
        expected.pop("lm_head.weight")
    missing = sorted(set(expected) - set(tensors), key=_natural)
    extra = sorted(set(tensors) - set(expected), key=_natural)
    if missing or extra:
        raise ModelError(
            f"{config.model_type} checkpoint does not match its config: missing {missing[:6]}"
            f"{' ...' if len(missing) > 6 else ''}, unexpected {extra[:6]}{' ...' if len(extra) > 6 else ''}"
        )
    bad = [
        f"{k}: found {tuple(tensors[k].shape)}, expected {s}"
        for k, s in expected.items()
        if tuple(tensors[k].shape) != s
    ]
    if bad:
        raise ModelError(f"{config.model_type} checkpoint has tensors of the wrong shape: {bad[:6]}")

    def array(name, transpose=False):  # a view of the checkpoint's (memory-mapped) tensor
        x = np.asarray(tensors[name])
        return x.T if transpose else x

    layers = {
        leaf: LayerStack([array(f"model.layers.{i}.{name}", transpose) for i in range(config.num_hidden_layers)])
        for leaf, (name, transpose) in _layer_leaves(config).items()
    }
    embed = array("model.embed_tokens.weight")
    head_name = "lm_head.weight" if "lm_head.weight" in tensors else "model.embed_tokens.weight"
    head_W = array(head_name)  # untied: placing the params gives it its own device buffer
    body = {"embed": embed, "layers": layers, "norm": array("model.norm.weight")}
    return {"body": body, "head": Head(W=head_W, b=None)}


def _natural(name: str):
    return [int(p) if p.isdigit() else p for p in name.replace(".", " ").split()]
