"""OPT's sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the mesh)
and the heads a ``heads`` axis holds."""

from jaxassoc.models.opt.config import OPTConfig
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/embed": ("vocab", E),
    "body/positions": (None, E),
    "body/project_in": (None, E),
    "body/project_out": (E, None),
    **{f"body/layers/{n}/{k}": a for n in ("attn_ln", "mlp_ln") for k, a in STACKED_NORM.items()},
    **{f"body/layers/{n}/w": (L, E, "heads") for n in ("q", "k", "v")},
    **{f"body/layers/{n}/b": (L, "heads") for n in ("q", "k", "v")},
    "body/layers/o/w": (L, "heads", E),
    "body/layers/o/b": (L, None),
    "body/layers/fc1/w": (L, E, "mlp"),
    "body/layers/fc1/b": (L, "mlp"),
    "body/layers/fc2/w": (L, "mlp", E),
    "body/layers/fc2/b": (L, None),
    **{f"body/final_ln/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
}


def units(config: OPTConfig) -> dict[str, int]:
    return {"heads": config.num_attention_heads}
