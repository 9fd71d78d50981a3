"""GPT-2's sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the
mesh) and the heads a ``heads`` axis holds."""

from jaxassoc.models.gpt2.config import GPT2Config
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/wte": ("vocab", E),
    "body/wpe": (None, E),
    **{f"body/blocks/{n}/{k}": a for n in ("ln_1", "ln_2") for k, a in STACKED_NORM.items()},
    "body/blocks/c_attn/w": (L, E, "heads"),
    "body/blocks/c_attn/b": (L, "heads"),
    "body/blocks/c_proj/w": (L, "heads", E),
    "body/blocks/c_proj/b": (L, None),
    "body/blocks/c_fc/w": (L, E, "mlp"),
    "body/blocks/c_fc/b": (L, "mlp"),
    "body/blocks/mlp_proj/w": (L, "mlp", E),
    "body/blocks/mlp_proj/b": (L, None),
    **{f"body/ln_f/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
}


def units(config: GPT2Config) -> dict[str, int]:
    return {"heads": config.n_head}
