"""T5 sharding table: each parameter path's logical axes (``partitioning.RULES`` maps them onto the mesh)
and the heads the ``heads`` axis holds."""

from jaxassoc.models.t5.config import T5Config

L, E = "layers", "embed"


def _attention(prefix: str) -> dict:
    return {**{f"{prefix}/{n}": (L, E, "heads") for n in ("q", "k", "v")}, f"{prefix}/o": (L, "heads", E)}


def _ffn(prefix: str) -> dict:
    return {**{f"{prefix}/{n}": (L, E, "mlp") for n in ("wi", "wi_0", "wi_1")}, f"{prefix}/wo": (L, "mlp", E)}


def _stack(side: str, attention: tuple[str, ...], norms: tuple[str, ...]) -> dict:
    blocks = f"body/{side}/blocks"
    return {
        f"body/{side}/rel_bias": (None, None),
        f"body/{side}/final_norm": (None,),
        **{f"{blocks}/{n}": (L, None) for n in norms},
        **{k: a for name in attention for k, a in _attention(f"{blocks}/{name}").items()},
        **_ffn(f"{blocks}/ffn"),
    }


AXES = {
    "body/shared": ("vocab", E),
    **_stack("encoder", ("attn",), ("attn_norm", "ffn_norm")),
    **_stack("decoder", ("self_attn", "cross_attn"), ("self_norm", "cross_norm", "ffn_norm")),
    "head/W": ("vocab", E),
}


def units(config: T5Config) -> dict[str, int]:
    return {"heads": config.num_heads}
