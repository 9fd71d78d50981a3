"""Llama / Mistral sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them
onto the mesh) and the query / key-value heads the ``heads`` / ``kv_heads`` axes hold."""

from jaxassoc.models.llama.config import LlamaConfig

L, E = "layers", "embed"
AXES = {
    "body/embed": ("vocab", E),
    "body/layers/attn_norm": (L, None),
    "body/layers/q": (L, E, "heads"),
    "body/layers/k": (L, E, "kv_heads"),
    "body/layers/v": (L, E, "kv_heads"),
    "body/layers/o": (L, "heads", E),
    "body/layers/q_bias": (L, "heads"),  # Qwen2 (qkv_bias)
    "body/layers/k_bias": (L, "kv_heads"),
    "body/layers/v_bias": (L, "kv_heads"),
    "body/layers/mlp_norm": (L, None),
    "body/layers/gate": (L, E, "mlp"),
    "body/layers/up": (L, E, "mlp"),
    "body/layers/down": (L, "mlp", E),
    "body/norm": (None,),
    "head/W": ("vocab", E),
}


def units(config: LlamaConfig) -> dict[str, int]:
    return {"heads": config.num_attention_heads, "kv_heads": config.num_key_value_heads}
