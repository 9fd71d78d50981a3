"""Qwen2 sharding table: the llama family's (it includes the query/key/value biases)."""

from jaxassoc.models.llama.sharding import AXES, units

__all__ = ["AXES", "units"]
