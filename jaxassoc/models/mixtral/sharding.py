"""Mixtral sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the
mesh) and the query / key-value heads the ``heads`` / ``kv_heads`` axes hold. The experts' axis is not
sharded: each expert's hidden (``mlp``) dimension is split over tensor parallelism instead, so every
device holds a slice of every expert and the dense expert computation needs no all-to-all."""

from jaxassoc.models.mixtral.config import MixtralConfig

L, E = "layers", "embed"
AXES = {
    "body/embed": ("vocab", E),
    "body/layers/attn_norm": (L, None),
    "body/layers/q": (L, E, "heads"),
    "body/layers/k": (L, E, "kv_heads"),
    "body/layers/v": (L, E, "kv_heads"),
    "body/layers/o": (L, "heads", E),
    "body/layers/mlp_norm": (L, None),
    "body/layers/router": (L, E, None),
    "body/layers/gate": (L, None, E, "mlp"),
    "body/layers/up": (L, None, E, "mlp"),
    "body/layers/down": (L, None, "mlp", E),
    "body/norm": (None,),
    "head/W": ("vocab", E),
}


def units(config: MixtralConfig) -> dict[str, int]:
    return {"heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads}
