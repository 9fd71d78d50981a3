"""GPT-Neo sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the
mesh) and the heads a ``heads`` axis holds."""

from jaxassoc.models.gpt_neo.config import GPTNeoConfig
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/wte": ("vocab", E),
    "body/wpe": (None, E),
    **{f"body/h/{n}/{k}": a for n in ("ln_1", "ln_2") for k, a in STACKED_NORM.items()},
    **{f"body/h/{n}": (L, E, "heads") for n in ("q_proj", "k_proj", "v_proj")},
    "body/h/out_proj/w": (L, "heads", E),
    "body/h/out_proj/b": (L, None),
    "body/h/c_fc/w": (L, E, "mlp"),
    "body/h/c_fc/b": (L, "mlp"),
    "body/h/c_proj/w": (L, "mlp", E),
    "body/h/c_proj/b": (L, None),
    **{f"body/ln_f/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
}


def units(config: GPTNeoConfig) -> dict[str, int]:
    return {"heads": config.num_heads}
