"""T5 parameters from HF tensors (``T5ForConditionalGeneration``): HF name -> module path, ``nn.Linear``
weights transposed to ``(in, out)``, layers stacked lazily, shapes from the abstract module. The head is
``lm_head.weight`` (v1.1) or, in a checkpoint that ties it and stores none, the shared embeddings."""

from __future__ import annotations

from typing import Mapping

import numpy as np
from flax import nnx

from jaxassoc.models.base import Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.family import param_shapes
from jaxassoc.models.t5.config import T5Config
from jaxassoc.models.t5.modeling import new_body

# Copies of the shared embeddings, and the unused cross-attention bias table HF itself ignores on load.
_IGNORED = (
    "encoder.embed_tokens.",
    "decoder.embed_tokens.",
    "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.",
)
_MLP = {"gate": "wi_0", "up": "wi_1", "down": "wo"}  # the gated MLP's; the plain one's up is wi
_ENCODER = {"attn_norm": "layer.0.layer_norm", "attn": "layer.0.SelfAttention", "mlp_norm": "layer.1.layer_norm",
            "mlp": "layer.1.DenseReluDense"}  # fmt: skip
_DECODER = {
    "attn_norm": "layer.0.layer_norm",
    "attn": "layer.0.SelfAttention",
    "cross_norm": "layer.1.layer_norm",
    "cross_attn": "layer.1.EncDecAttention",
    "mlp_norm": "layer.2.layer_norm",
    "mlp": "layer.2.DenseReluDense",
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: T5Config) -> dict:
    """``{"body", "head"}`` from HF tensors; ModelError naming missing, unexpected or misshapen ones."""
    c = config
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    t = TensorTaker(tensors, prefixes=(), ignore=_IGNORED, outside=("lm_head.",))

    def stack(side: str, n: int, names: dict, shapes_: dict) -> dict:
        out = {}
        for leaf, hf in names.items():
            pattern = f"{side}.block.{{}}.{hf}"
            if "norm" in leaf:  # RMSNorm: {"scale"}
                out[leaf] = t.stacked(pattern, n, shapes_[leaf])
            else:  # Attention's q, k, v, o or the MLP's projections (bias-free linear layers)
                plain = "gate" not in shapes_[leaf]
                out[leaf] = {
                    sub: t.stacked(f"{pattern}.{'wi' if plain and sub == 'up' else _MLP.get(sub, sub)}", n, s)
                    for sub, s in shapes_[leaf].items()
                }
        return out

    def side(name: str, n: int, names: dict) -> dict:
        s = shapes[name]
        bias_owner = "layer.0.SelfAttention.relative_attention_bias.weight"
        return {
            "rel_bias": t.take(f"{name}.block.0.{bias_owner}", s["rel_bias"]),
            "blocks": stack(name, n, names, s["blocks"]),
            "final_norm": t.module(f"{name}.final_layer_norm", s["final_norm"]),
        }

    body = {
        "shared": t.take("shared.weight", shapes["shared"]),
        "encoder": side("encoder", c.num_layers, _ENCODER),
        "decoder": side("decoder", c.num_decoder_layers, _DECODER),
    }
    tied = c.tie_word_embeddings and not t.has("lm_head.weight")
    W = body["shared"] if tied else t.take("lm_head.weight", shapes["shared"])
    t.finish("t5")
    return {"body": body, "head": Head(W=W, b=None)}
