"""Phi-3 parameters: each layer's fused ``self_attn.qkv_proj`` (query, key, value rows) and ``mlp.gate_up_proj``
(gate rows, then up rows) are split, as views, into the llama layout and read by the llama-like
``params_from_hf``. A missing or misshapen fused tensor raises one ModelError naming it."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from jaxassoc.errors import ModelError
from jaxassoc.models.llama_like import LlamaLikeConfig
from jaxassoc.models.llama_like import params_from_hf as llama_params_from_hf


def _splits(config: LlamaLikeConfig) -> dict[str, tuple[tuple[str, int], ...]]:
    """Fused HF name inside a layer -> its parts (llama name, rows) in order."""
    c = config
    q, kv, F = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim, c.intermediate_size
    return {
        "self_attn.qkv_proj.weight": (
            ("self_attn.q_proj.weight", q),
            ("self_attn.k_proj.weight", kv),
            ("self_attn.v_proj.weight", kv),
        ),
        "mlp.gate_up_proj.weight": (("mlp.gate_proj.weight", F), ("mlp.up_proj.weight", F)),
    }


def params_from_hf(tensors: Mapping[str, np.ndarray], config: LlamaLikeConfig) -> dict[str, Any]:
    """``{"body", "head"}`` from Phi-3's HF tensors (see the module docstring)."""
    out = dict(tensors)
    missing, bad, extra = [], [], []
    for i in range(config.num_hidden_layers):
        for fused, parts in _splits(config).items():
            name = f"model.layers.{i}.{fused}"
            extra += [f"model.layers.{i}.{part}" for part, _ in parts if f"model.layers.{i}.{part}" in out]
            if name not in out:
                missing.append(name)
                continue
            shape = (sum(rows for _, rows in parts), config.hidden_size)
            if tuple(out[name].shape) != shape:
                bad.append(f"{name}: found {tuple(out[name].shape)}, expected {shape}")
                continue
            x, start = np.asarray(out.pop(name)), 0
            for part, rows in parts:
                out[f"model.layers.{i}.{part}"] = x[start : start + rows]
                start += rows
    if missing or extra:
        raise ModelError(
            f"phi3 checkpoint does not match its config: missing {missing[:6]}"
            f"{' ...' if len(missing) > 6 else ''}, unexpected {extra[:6]}{' ...' if len(extra) > 6 else ''}"
        )
    if bad:
        raise ModelError(f"phi3 checkpoint has tensors of the wrong shape: {bad[:6]}")
    return llama_params_from_hf(out, config)
