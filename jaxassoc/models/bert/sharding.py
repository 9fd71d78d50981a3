"""BERT / RoBERTa sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them
onto the mesh) and the heads a ``heads`` axis holds."""

from jaxassoc.models.bert.config import BertConfig
from jaxassoc.models.partitioning import NORM, STACKED_NORM

L, E = "layers", "embed"
AXES = {
    "body/word": ("vocab", E),
    "body/position": (None, E),
    "body/token_type": (None, E),
    **{f"body/embed_ln/{k}": a for k, a in NORM.items()},
    **{f"body/blocks/{n}/w": (L, E, "heads") for n in ("query", "key", "value")},
    **{f"body/blocks/{n}/b": (L, "heads") for n in ("query", "key", "value")},
    "body/blocks/attn_out/w": (L, "heads", E),
    "body/blocks/attn_out/b": (L, None),
    **{f"body/blocks/{n}/{k}": a for n in ("attn_ln", "ffn_ln") for k, a in STACKED_NORM.items()},
    "body/blocks/ffn_in/w": (L, E, "mlp"),
    "body/blocks/ffn_in/b": (L, "mlp"),
    "body/blocks/ffn_out/w": (L, "mlp", E),
    "body/blocks/ffn_out/b": (L, None),
    "body/mlm_transform/dense/w": (E, None),
    "body/mlm_transform/dense/b": (None,),
    **{f"body/mlm_transform/ln/{k}": a for k, a in NORM.items()},
    "head/W": ("vocab", E),
    "head/b": ("vocab",),
}


def units(config: BertConfig) -> dict[str, int]:
    return {"heads": config.num_heads}
