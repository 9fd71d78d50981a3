"""Mixtral parameters from HF tensors, in either expert layout:

- the hub's (and transformers' ``save_pretrained``'s): ``model.layers.{i}.block_sparse_moe.gate.weight``
  (the router) and per-expert ``block_sparse_moe.experts.{j}.w1/w3/w2.weight`` (gate, up, down);
- transformers 5's in-memory one: ``model.layers.{i}.mlp.gate.weight`` and the fused 3-D
  ``mlp.experts.gate_up_proj`` ``(E, 2F, D)`` (gate rows first) and ``mlp.experts.down_proj`` ``(E, D, F)``.

Projections are transposed to ``(in, out)``, layers (and experts) stacked lazily, expected shapes taken from
the abstract module; missing, unexpected or misshapen tensors raise one ModelError naming them. The head is
untied from the embeddings.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import LayerStack, TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.mixtral.config import MODEL_TYPE, MixtralConfig
from jaxassoc.models.mixtral.modeling import new_body

# Our stacked attention leaf -> (HF name inside a layer, transpose to (in, out)).
_ATTENTION = {
    "attn_norm": ("input_layernorm.weight", False),
    "q": ("self_attn.q_proj.weight", True),
    "k": ("self_attn.k_proj.weight", True),
    "v": ("self_attn.v_proj.weight", True),
    "o": ("self_attn.o_proj.weight", True),
    "mlp_norm": ("post_attention_layernorm.weight", False),
}
_EXPERT = {"gate": "w1", "up": "w3", "down": "w2"}  # our expert leaf -> the hub's per-expert name


def _fused(tensors: Mapping[str, np.ndarray]) -> bool:
    """Whether the checkpoint stores the experts as transformers 5's fused 3-D tensors."""
    return any(".mlp.experts." in name for name in tensors)


def _per_expert(take: TensorTaker, i: int, config: MixtralConfig, shapes: dict) -> dict[str, LayerStack]:
    """Layer ``i``'s router and experts from the hub layout; each expert leaf stacked over experts."""
    moe = f"layers.{i}.block_sparse_moe"
    out = {"router": take.take(f"{moe}.gate.weight", shapes["router"], transpose=True)}
    for leaf, name in _EXPERT.items():
        out[leaf] = LayerStack(
            [
                take.take(f"{moe}.experts.{j}.{name}.weight", shapes[leaf][1:], transpose=True)
                for j in range(config.num_local_experts)
            ]
        )
    return out


def _fused_experts(take: TensorTaker, i: int, config: MixtralConfig, shapes: dict) -> dict[str, np.ndarray]:
    """Layer ``i``'s router and experts from the fused layout (views, no copy)."""
    E, D, F = config.num_local_experts, config.hidden_size, config.intermediate_size
    gate_up = take.take(f"layers.{i}.mlp.experts.gate_up_proj", (E, 2 * F, D))
    down = take.take(f"layers.{i}.mlp.experts.down_proj", (E, D, F))
    return {
        "router": take.take(f"layers.{i}.mlp.gate.weight", shapes["router"], transpose=True),
        "gate": gate_up[:, :F].transpose(0, 2, 1),
        "up": gate_up[:, F:].transpose(0, 2, 1),
        "down": down.transpose(0, 2, 1),
    }


def params_from_hf(tensors: Mapping[str, np.ndarray], config: MixtralConfig) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face tensors (either expert layout); the head is a separate copy
    even for tied checkpoints. ModelError naming missing, unexpected or misshapen tensors."""
    tensors = {k: v for k, v in tensors.items() if not k.endswith("rotary_emb.inv_freq")}  # old checkpoints
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    layer_shapes = {leaf: shape[1:] for leaf, shape in shapes["layers"].items()}
    take = TensorTaker(tensors, prefixes=("model.",), outside=("lm_head.",))
    experts = _fused_experts if _fused(tensors) else _per_expert
    per_layer = [experts(take, i, config, layer_shapes) for i in range(config.num_hidden_layers)]
    layers = {leaf: LayerStack([layer[leaf] for layer in per_layer]) for leaf in ("router", *_EXPERT)}
    for leaf, (name, transpose) in _ATTENTION.items():
        layers[leaf] = take.stack(f"layers.{{}}.{name}", config.num_hidden_layers, layer_shapes[leaf], transpose)
    embed = take.take("embed_tokens.weight", shapes["embed"])
    norm = take.take("norm.weight", shapes["norm"])
    if take.has("lm_head.weight") or not config.tie_word_embeddings:
        head_W = take.take("lm_head.weight", shapes["embed"])
    else:
        head_W = embed  # untied: placing the params gives it its own device buffer
    take.finish(MODEL_TYPE)
    body = {"embed": embed, "layers": {leaf: layers[leaf] for leaf in shapes["layers"]}, "norm": norm}
    return {"body": body, "head": Head(W=head_W, b=None)}
