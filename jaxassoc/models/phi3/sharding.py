"""Phi-3 sharding table: the llama family's (the fused projections are split at load time)."""

from jaxassoc.models.llama.sharding import AXES, units

__all__ = ["AXES", "units"]
