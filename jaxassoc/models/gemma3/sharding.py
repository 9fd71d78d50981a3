"""Gemma 3 sharding table: Gemma 2's plus the per-layer query / key norms (replicated)."""

from jaxassoc.models.gemma2.sharding import AXES as GEMMA2_AXES
from jaxassoc.models.gemma2.sharding import L, units

AXES = {**GEMMA2_AXES, "body/layers/q_norm": (L, None), "body/layers/k_norm": (L, None)}

__all__ = ["AXES", "units"]
