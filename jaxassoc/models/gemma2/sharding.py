"""Gemma 2 sharding table: each parameter path's logical axes and the heads along ``heads`` / ``kv_heads``."""

from typing import Any

L, E = "layers", "embed"
AXES = {
    "body/embed": ("vocab", E),
    "body/layers/attn_norm": (L, None),
    "body/layers/q": (L, E, "heads"),
    "body/layers/k": (L, E, "kv_heads"),
    "body/layers/v": (L, E, "kv_heads"),
    "body/layers/o": (L, "heads", E),
    "body/layers/post_attn_norm": (L, None),
    "body/layers/mlp_norm": (L, None),
    "body/layers/gate": (L, E, "mlp"),
    "body/layers/up": (L, E, "mlp"),
    "body/layers/down": (L, "mlp", E),
    "body/layers/post_mlp_norm": (L, None),
    "body/norm": (None,),
    "head/W": ("vocab", E),
}


def units(config: Any) -> dict[str, int]:
    return {"heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads}
