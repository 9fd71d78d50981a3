"""MPT's sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the mesh)
and the heads a ``heads`` axis holds."""

from jaxassoc.models.mpt.config import MptConfig

L, E = "layers", "embed"
AXES = {
    "body/wte": ("vocab", E),
    "body/blocks/norm_1": (L, None),
    "body/blocks/wqkv": (L, E, "heads"),
    "body/blocks/out": (L, "heads", E),
    "body/blocks/norm_2": (L, None),
    "body/blocks/up": (L, E, "mlp"),
    "body/blocks/down": (L, "mlp", E),
    "body/norm_f": (None,),
    "head/W": ("vocab", E),
}


def units(config: MptConfig) -> dict[str, int]:
    return {"heads": config.n_heads}
