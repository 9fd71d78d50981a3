"""GPT-NeoX sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the
mesh) and the heads a ``heads`` axis holds. The fused ``query_key_value`` output is laid out head by head
(``[q_h, k_h, v_h]``), so splitting it over ``heads`` gives each device whole heads."""

from jaxassoc.models.gpt_neox.config import GPTNeoXConfig
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/embed_in": ("vocab", E),
    **{
        f"body/layers/{n}/{k}": a
        for n in ("input_layernorm", "post_attention_layernorm")
        for k, a in STACKED_NORM.items()
    },
    "body/layers/query_key_value/w": (L, E, "heads"),
    "body/layers/query_key_value/b": (L, "heads"),
    "body/layers/dense/w": (L, "heads", E),
    "body/layers/dense/b": (L, None),
    "body/layers/dense_h_to_4h/w": (L, E, "mlp"),
    "body/layers/dense_h_to_4h/b": (L, "mlp"),
    "body/layers/dense_4h_to_h/w": (L, "mlp", E),
    "body/layers/dense_4h_to_h/b": (L, None),
    **{f"body/final_layer_norm/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
}


def units(config: GPTNeoXConfig) -> dict[str, int]:
    return {"heads": config.num_attention_heads}
