"""GPT-J sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the mesh)
and the heads a ``heads`` axis holds."""

from jaxassoc.models.gptj.config import GPTJConfig
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/wte": ("vocab", E),
    **{f"body/h/ln_1/{k}": a for k, a in STACKED_NORM.items()},
    **{f"body/h/{n}": (L, E, "heads") for n in ("q_proj", "k_proj", "v_proj")},
    "body/h/out_proj": (L, "heads", E),
    "body/h/fc_in/w": (L, E, "mlp"),
    "body/h/fc_in/b": (L, "mlp"),
    "body/h/fc_out/w": (L, "mlp", E),
    "body/h/fc_out/b": (L, None),
    **{f"body/ln_f/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
    "head/b": ("vocab",),
}


def units(config: GPTJConfig) -> dict[str, int]:
    return {"heads": config.n_head}
