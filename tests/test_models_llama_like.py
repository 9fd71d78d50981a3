"""The llama-like decoder (``jaxassoc.models.llama_like``): every member family builds the same named
sub-modules, so a sub-layer has one path whichever checkpoint it came from, and a flag adds only its own
parameters."""

import importlib

import jax
import pytest
from flax import nnx

from jaxassoc.models import llama_like
from jaxassoc.models.family import family_for, param_shapes

MEMBERS = ("llama", "qwen2", "phi3", "qwen3", "mixtral", "olmo")
SHARED = {"embed", *(f"layers/attn/{p}/w" for p in "qkvo"), *(f"layers/mlp/{p}/w" for p in ("gate", "up", "down"))}
NORMS = {"final_norm/scale", "layers/attn_norm/scale", "layers/mlp_norm/scale"}  # RMSNorm's; OLMo's have none
FLAGGED = {  # what each flag adds, and nothing else
    "qkv_bias": {f"layers/attn/{p}/b" for p in "qkv"},
    "qk_norm": {"layers/attn/q_norm/scale", "layers/attn/k_norm/scale"},
    "num_local_experts": {"layers/mlp/router/w"},  # the experts keep the MLP's gate/up/down paths
}


def _paths(family: str) -> tuple[set[str], object]:
    base = importlib.import_module(f"family_specs.{family}").BASE
    config = family_for(base["model_type"]).config_from_hf(base)
    shapes = param_shapes(nnx.eval_shape(lambda: family_for(base["model_type"]).new_body(config)))
    leaves = jax.tree_util.tree_leaves_with_path(shapes, is_leaf=lambda x: isinstance(x, tuple))
    return {"/".join(k.key for k in path) for path, _ in leaves}, config


@pytest.mark.parametrize("family", MEMBERS)
def test_every_member_has_the_same_paths_for_the_same_sub_layers(family):
    paths, config = _paths(family)
    assert family_for(config.model_type).new_body is llama_like.new_body
    flagged = set().union(*(added for flag, added in FLAGGED.items() if getattr(config, flag)))
    expected = SHARED | flagged | (NORMS if config.norm == "rms" else set())
    assert paths == expected, sorted(paths ^ expected)
    axes = {p.removeprefix("body/") for p in family_for(config.model_type).axes if p.startswith("body/")}
    assert paths <= axes  # every parameter has its logical axes


def test_the_flags_differ_where_the_families_do():
    configs = {family: _paths(family)[1] for family in MEMBERS}
    flags = {family: (c.qkv_bias, c.qk_norm, bool(c.num_local_experts), c.norm) for family, c in configs.items()}
    assert flags == {
        "llama": (False, False, False, "rms"),
        "qwen2": (True, False, False, "rms"),
        "phi3": (False, False, False, "rms"),
        "qwen3": (False, True, False, "rms"),
        "mixtral": (False, False, True, "rms"),
        "olmo": (False, False, False, "layer"),
    }
