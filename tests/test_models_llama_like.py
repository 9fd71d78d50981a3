"""The llama-like decoder (``jaxassoc.models.llama_like``): every member family builds the same named
sub-modules, so a sub-layer has one path whichever checkpoint it came from, and a flag adds only its own
parameters."""

import importlib

import family_specs
import jax
import pytest
from flax import nnx

from jaxassoc.models import llama_like
from jaxassoc.models.family import family_for, param_shapes

MEMBERS = ("llama", "qwen2", "phi3", "qwen3", "mixtral", "olmo", "gemma2", "gemma3")
SHARED = {"embed", *(f"layers/attn/{p}/w" for p in "qkvo"), *(f"layers/mlp/{p}/w" for p in ("gate", "up", "down"))}
NORMS = {"final_norm/scale", "layers/attn_norm/scale", "layers/mlp_norm/scale"}  # RMSNorm's; OLMo's have none
FLAGGED = {  # what each flag adds, and nothing else
    "qkv_bias": {f"layers/attn/{p}/b" for p in "qkv"},
    "qk_norm": {"layers/attn/q_norm/scale", "layers/attn/k_norm/scale"},
    "num_local_experts": {"layers/mlp/router/w"},  # the experts keep the MLP's gate/up/down paths
    "post_norms": {"layers/post_attn_norm/scale", "layers/post_mlp_norm/scale"},
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
    expected = SHARED | flagged | (NORMS if config.norm != "layer" else set())
    assert paths == expected, sorted(paths ^ expected)
    axes = {p.removeprefix("body/") for p in family_for(config.model_type).param_axes(config) if p.startswith("body/")}
    assert paths == axes  # every parameter has its logical axes


def test_the_flags_differ_where_the_families_do():
    configs = {family: _paths(family)[1] for family in MEMBERS}
    flags = {
        family: (c.qkv_bias, c.qk_norm, bool(c.num_local_experts), c.norm, c.post_norms)
        for family, c in configs.items()
    }
    assert flags == {
        "llama": (False, False, False, "rms", False),
        "qwen2": (True, False, False, "rms", False),
        "phi3": (False, False, False, "rms", False),
        "qwen3": (False, True, False, "rms", False),
        "mixtral": (False, False, True, "rms", False),
        "olmo": (False, False, False, "layer", False),
        "gemma2": (False, False, False, "gemma", True),
        "gemma3": (False, True, False, "gemma", True),
    }


def test_a_variant_built_from_flags_alone_matches_transformers(tiny_checkpoint):
    """Qwen3's decoder, written as flags on a LlamaLikeConfig by hand (no family's config reader), with the
    llama-like parameter reader and forward pass, gives transformers' logits."""
    import json

    import jax.numpy as jnp
    import numpy as np
    import torch
    from family_specs.qwen3 import PORT
    from safetensors.numpy import load_file

    from jaxassoc.models.heads import head_logits
    from jaxassoc.models.mesh import device_params

    folder = tiny_checkpoint(PORT)
    hf = json.loads((folder / "config.json").read_text())
    config = llama_like.LlamaLikeConfig(
        model_type="my-qk-norm-llama",
        vocab_size=hf["vocab_size"],
        hidden_size=hf["hidden_size"],
        intermediate_size=hf["intermediate_size"],
        num_hidden_layers=hf["num_hidden_layers"],
        num_attention_heads=hf["num_attention_heads"],
        num_key_value_heads=hf["num_key_value_heads"],
        head_dim=hf["head_dim"],
        rms_norm_eps=hf["rms_norm_eps"],
        rope_theta=hf.get("rope_theta") or hf["rope_parameters"]["rope_theta"],
        max_position_embeddings=hf["max_position_embeddings"],
        tie_word_embeddings=True,
        sliding_window=3,
        local_layers=(False, True, True),
        qk_norm=True,
    )
    params = device_params(llama_like.params_from_hf(load_file(folder / "model.safetensors"), config))
    ids = np.random.default_rng(0).integers(3, config.vocab_size, size=(2, 8))
    body = llama_like.new_body(config)
    hidden = nnx.merge(nnx.graphdef(body), params["body"])(jnp.asarray(ids), jnp.ones_like(jnp.asarray(ids))).hidden
    ours = np.asarray(head_logits(params["head"], hidden))
    with torch.no_grad():
        ref = family_specs.load_torch(PORT, folder)(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(ours - ref).max() <= 1e-4


@pytest.mark.parametrize("family", ("llama", "qwen2", "phi3", "qwen3", "mixtral", "olmo"))
@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"num_attention_heads": 4, "num_key_value_heads": 3}, "num_attention_heads = 4 is not a multiple of"),
        ({"head_dim": 15}, "head_dim = 15 must be even for rotary embeddings"),
    ],
)
def test_every_member_refuses_heads_the_decoder_cannot_run(family, fields, words):
    from jaxassoc.errors import ModelError

    base = importlib.import_module(f"family_specs.{family}").BASE
    with pytest.raises(ModelError, match=rf"^{base['model_type']} config: {words}"):
        family_for(base["model_type"]).config_from_hf({**base, **fields})
