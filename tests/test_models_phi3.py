"""Phi-3 port: fused tensors named when missing or misshapen, and that the window reaches the forward pass.
Logits, decoding and packing against transformers: ``tests/family_specs/phi3.py``; config refusals:
``tests/test_models_refusals.py``."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.phi3 import BASE, SPECS
from safetensors.numpy import load_file
from tolerances import f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.mesh import device_params
from jaxassoc.models.phi3 import FAMILY as phi3


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint, tmp_path_factory):
    """The 'phi3' spec (fused projections, window 3 on every layer) saved and read back."""
    folder = tiny_checkpoint(SPECS[0])
    config = phi3.config_from_hf(json.loads((folder / "config.json").read_text()))
    tensors = load_file(folder / "model.safetensors")
    return folder, config, tensors, device_params(phi3.params_from_hf(tensors, config))


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
    np.testing.assert_array_equal(np.asarray(layers["attn"]["q"]["w"][1]), qkv[:32].T)
    np.testing.assert_array_equal(np.asarray(layers["attn"]["k"]["w"][1]), qkv[32:48].T)
    np.testing.assert_array_equal(np.asarray(layers["attn"]["v"]["w"][1]), qkv[48:].T)
    np.testing.assert_array_equal(np.asarray(layers["mlp"]["gate"]["w"][1]), gate_up[:64].T)
    np.testing.assert_array_equal(np.asarray(layers["mlp"]["up"]["w"][1]), gate_up[64:].T)


def test_window_reaches_the_forward_pass(tiny):
    """Without the window of 3 the states from position 3 on differ (transformers applies it too)."""
    folder, config, _, params = tiny
    assert config.sliding_window == 3
    ids = jnp.asarray(np.random.default_rng(0).integers(3, 100, size=(1, 12)))
    ours = np.asarray(Forward(phi3, config)(params["body"], ids, jnp.ones_like(ids)).hidden)
    wide = np.asarray(
        phi3.forward(
            params["body"], ids, jnp.ones_like(ids), config=dataclasses.replace(config, sliding_window=None)
        ).hidden
    )
    # within the window the same sums in another compiled program: float32, 2 layers, inner 64
    np.testing.assert_allclose(
        wide[0, :3], ours[0, :3], rtol=0, atol=f32_chain(2, 64, float(np.abs(ours[0, :3]).max()))
    )
    assert np.abs(wide[0, 3:] - ours[0, 3:]).max() > 1e-3
    model = load_model(folder)
    assert (model.family, model.objective, model.config) == ("phi3", "causal", config)
