"""BERT / RoBERTa sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them
onto the mesh) and the heads a ``heads`` axis holds."""

from jaxassoc.models.bert.config import BertConfig
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/embed": ("vocab", E),
    "body/positions": (None, E),
    "body/token_type": (None, E),
    **{f"body/embed_norm/{k}": a for k, a in NORM.items()},
    **{f"body/layers/attn/{n}/w": (L, E, "heads") for n in "qkv"},
    **{f"body/layers/attn/{n}/b": (L, "heads") for n in "qkv"},
    "body/layers/attn/o/w": (L, "heads", E),
    "body/layers/attn/o/b": (L, None),
    **{f"body/layers/{n}/{k}": a for n in ("attn_norm", "mlp_norm") for k, a in STACKED_NORM.items()},
    "body/layers/mlp/up/w": (L, E, "mlp"),
    "body/layers/mlp/up/b": (L, "mlp"),
    "body/layers/mlp/down/w": (L, "mlp", E),
    "body/layers/mlp/down/b": (L, None),
    "body/mlm_transform/dense/w": (E, None),
    "body/mlm_transform/dense/b": (None,),
    **{f"body/mlm_transform/norm/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
    "head/b": ("vocab",),
}


def units(config: BertConfig) -> dict[str, int]:
    return {"heads": config.num_heads}
