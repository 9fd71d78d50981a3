"""Phi-3 port: config refusal by field, fused tensors named when missing or misshapen, and that the window
reaches the forward pass. Logits, decoding and packing against transformers: ``tests/family_specs/phi3.py``."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.phi3 import SPECS
from safetensors.numpy import load_file

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.partitioning import device_params
from jaxassoc.models.phi3 import FAMILY as phi3

BASE = {
    "model_type": "phi3",
    "vocab_size": 101,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 64,
    "sliding_window": 2047,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 1.0},
}
LONGROPE = {"type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint, tmp_path_factory):
    """The 'phi3' spec (fused projections, window 3 on every layer) saved and read back."""
    folder = tiny_checkpoint(SPECS[0])
    config = phi3.config_from_hf(json.loads((folder / "config.json").read_text()))
    tensors = load_file(folder / "model.safetensors")
    return folder, config, tensors, device_params(phi3.params_from_hf(tensors, config))


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"rope_scaling": LONGROPE, "rope_parameters": None}, "rope_type = 'longrope'"),  # Phi-3-mini-128k
        ({"rope_parameters": {**LONGROPE, "type": None, "rope_type": "longrope"}}, "'longrope'"),
        ({"rope_scaling": {"type": "su", **{k: v for k, v in LONGROPE.items() if k != "type"}}}, "'su'"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "'linear'"),
        (
            {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.75}},
            "partial_rotary_factor = 0.75",
        ),  # Phi-4-mini
        ({"hidden_act": "gelu"}, "hidden_act = 'gelu'"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"model_type": "phi3small"}, "'phi3small'"),
        ({"hidden_size": None}, "hidden_size"),
    ],
)
def test_unsupported_config_raises_model_error(fields, words):
    config = {k: v for k, v in {**BASE, **fields}.items() if v is not None}
    config = {
        k: {kk: vv for kk, vv in v.items() if vv is not None} if isinstance(v, dict) else v for k, v in config.items()
    }
    with pytest.raises(ModelError, match=words):
        phi3.config_from_hf(config)


def test_config_reads_the_window_and_rope_theta():
    config = phi3.config_from_hf(BASE)
    assert (config.sliding_window, config.local_layers, config.rope_theta) == (2047, None, 1e4)
    v4 = {k: v for k, v in BASE.items() if k != "rope_parameters"}
    assert (
        phi3.config_from_hf({**v4, "rope_theta": 500.0, "rope_scaling": None, "sliding_window": None}).sliding_window
        is None
    )
    assert phi3.config_from_hf({**v4, "rope_theta": 500.0}).rope_theta == 500.0


@pytest.mark.parametrize("fused", ["self_attn.qkv_proj.weight", "mlp.gate_up_proj.weight"])
def test_missing_or_misshapen_fused_tensor_is_named(tiny, fused):
    _, config, tensors, _ = tiny
    name = f"model.layers.1.{fused}"
    with pytest.raises(ModelError, match=rf"phi3 checkpoint .*missing \['{name}'\]"):
        phi3.params_from_hf({k: v for k, v in tensors.items() if k != name}, config)
    with pytest.raises(ModelError, match=rf"{name}: found \(7, 32\), expected"):
        phi3.params_from_hf({**tensors, name: np.zeros((7, 32), np.float32)}, config)


def test_unfused_or_unknown_tensors_are_named(tiny):
    _, config, tensors, _ = tiny
    with pytest.raises(ModelError, match=r"unexpected \['model\.layers\.0\.self_attn\.q_proj\.weight'\]"):
        phi3.params_from_hf({**tensors, "model.layers.0.self_attn.q_proj.weight": np.zeros((32, 32))}, config)
    with pytest.raises(ModelError, match="model.layers.0.extra"):
        phi3.params_from_hf({**tensors, "model.layers.0.extra": np.zeros(3)}, config)


def test_fused_tensors_are_split_in_order(tiny):
    """q, k, v (then gate, up) are consecutive row blocks of the fused matrices, stored transposed."""
    _, config, tensors, params = tiny
    qkv = tensors["model.layers.1.self_attn.qkv_proj.weight"]
    gate_up = tensors["model.layers.1.mlp.gate_up_proj.weight"]
    layers = params["body"]["layers"]
    np.testing.assert_array_equal(np.asarray(layers["q"][1]), qkv[:32].T)
    np.testing.assert_array_equal(np.asarray(layers["k"][1]), qkv[32:48].T)
    np.testing.assert_array_equal(np.asarray(layers["v"][1]), qkv[48:].T)
    np.testing.assert_array_equal(np.asarray(layers["gate"][1]), gate_up[:64].T)
    np.testing.assert_array_equal(np.asarray(layers["up"][1]), gate_up[64:].T)


def test_window_reaches_the_forward_pass(tiny):
    """Without the window of 3 the states from position 3 on differ (transformers applies it too)."""
    folder, config, _, params = tiny
    assert config.sliding_window == 3
    ids = jnp.asarray(np.random.default_rng(0).integers(3, 100, size=(1, 12)))
    ours = np.asarray(phi3.forward(params["body"], ids, jnp.ones_like(ids), config=config).hidden)
    wide = np.asarray(
        phi3.forward(
            params["body"], ids, jnp.ones_like(ids), config=dataclasses.replace(config, sliding_window=None)
        ).hidden
    )
    np.testing.assert_allclose(wide[0, :3], ours[0, :3], atol=1e-5)
    assert np.abs(wide[0, 3:] - ours[0, 3:]).max() > 1e-3
    model = load_model(folder)
    assert (model.family, model.objective, model.config) == ("phi3", "causal", config)
