"""OLMo's sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the mesh)
and the query / key-value heads the ``heads`` / ``kv_heads`` axes hold."""

from jaxassoc.models.olmo.config import OlmoConfig

L, E = "layers", "embed"
AXES = {
    "body/embed": ("vocab", E),
    "body/layers/q": (L, E, "heads"),
    "body/layers/k": (L, E, "kv_heads"),
    "body/layers/v": (L, E, "kv_heads"),
    "body/layers/o": (L, "heads", E),
    "body/layers/gate": (L, E, "mlp"),
    "body/layers/up": (L, E, "mlp"),
    "body/layers/down": (L, "mlp", E),
    "head/W": ("vocab", E),
}


def units(config: OlmoConfig) -> dict[str, int]:
    return {"heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads}
