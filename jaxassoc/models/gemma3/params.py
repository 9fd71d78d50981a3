"""Gemma 3 text parameters from HF tensors: Gemma 2's layout plus each layer's ``q_norm`` / ``k_norm``."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from jaxassoc.models.gemma2.params import LAYER_LEAVES, read_params
from jaxassoc.models.gemma3.config import Gemma3Config
from jaxassoc.models.gemma3.modeling import new_body

GEMMA3_LEAVES = {
    **LAYER_LEAVES,
    "q_norm": ("self_attn.q_norm.weight", False),
    "k_norm": ("self_attn.k_norm.weight", False),
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: Gemma3Config) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face Gemma 3 text tensors; ModelError naming bad tensors."""
    return read_params(tensors, config, GEMMA3_LEAVES, new_body, "Gemma 3")
