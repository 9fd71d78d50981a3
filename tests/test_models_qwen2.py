"""Qwen2 port: the checkpoint's tensors named when missing, and that its features (query/key/value biases,
the sliding window on the layers ``layer_types`` names) reach the forward pass. Logits, decoding and packing
against transformers: ``tests/family_specs/qwen2.py``; config refusals: ``tests/test_models_refusals.py``."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.qwen2 import BASE, SPECS
from safetensors.numpy import load_file
from tolerances import f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import device_params
from jaxassoc.models.qwen2 import FAMILY as qwen2


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint, tmp_path_factory):
    """The 'qwen2' spec (biases, window 3 on layers 1 and 2, tied head) saved and read back."""
    folder = tiny_checkpoint(SPECS[0])
    hf_config = json.loads((folder / "config.json").read_text())
    config = qwen2.config_from_hf(hf_config)
    tensors = load_file(folder / "model.safetensors")
    return folder, config, tensors, device_params(qwen2.params_from_hf(tensors, config))


def test_layer_types_decide_the_windowed_layers():
    window = {"use_sliding_window": True, "sliding_window": 4}
    # transformers 4 configs: layers from max_window_layers on slide
    assert qwen2.config_from_hf({**BASE, **window, "max_window_layers": 1}).local_layers == (False, True, True)
    # transformers 5's layer_types wins over max_window_layers
    config = qwen2.config_from_hf(
        {
            **BASE,
            **window,
            "max_window_layers": 1,
            "layer_types": ["sliding_attention", "full_attention", "full_attention"],
        }
    )
    assert (config.sliding_window, config.local_layers) == (4, (True, False, False))
    # Qwen2.5's hub configs: a window size but use_sliding_window false -> no window at all
    off = qwen2.config_from_hf({**BASE, "use_sliding_window": False, "sliding_window": 32768, "max_window_layers": 1})
    assert (off.sliding_window, off.local_layers) == (None, None)
    assert qwen2.config_from_hf({**BASE, **window, "max_window_layers": 3}).sliding_window is None
    assert qwen2.config_from_hf(BASE).qkv_bias


def test_missing_tensor_is_named(tiny):
    _, config, tensors, _ = tiny
    missing = {k: v for k, v in tensors.items() if k != "model.layers.1.self_attn.k_proj.bias"}
    with pytest.raises(
        ModelError, match=r"qwen2 config: missing tensors \['model\.layers\.1\.self_attn\.k_proj\.bias'\]"
    ):
        qwen2.params_from_hf(missing, config)
    bad = dict(tensors, **{"model.layers.0.self_attn.q_proj.bias": np.zeros(5, np.float32)})
    with pytest.raises(ModelError, match=r"model\.layers\.0\.self_attn\.q_proj\.bias: found \(5,\), expected \(32,\)"):
        qwen2.params_from_hf(bad, config)


def _hidden(params, config, ids):
    return np.asarray(Forward(qwen2, config)(params["body"], jnp.asarray(ids), jnp.ones_like(jnp.asarray(ids))).hidden)


def test_biases_and_window_reach_the_forward_pass(tiny):
    """Zeroed biases, no window, or the window on every layer each change the states; the window only
    from position 3 (window 3) on."""
    _, config, _, params = tiny
    assert config.qkv_bias and config.sliding_window == 3 and config.local_layers == (False, True, True)
    ids = np.random.default_rng(0).integers(3, 100, size=(1, 12))
    ours = _hidden(params, config, ids)
    layers = dict(params["body"]["layers"])
    attn = layers["attn"]
    for name in ("q", "k", "v"):
        assert np.abs(np.asarray(attn[name]["b"])).max() > 0
    unbiased = {n: {**leaves, "b": jnp.zeros_like(leaves["b"])} if n in "qkv" else leaves for n, leaves in attn.items()}
    zeroed = {**params, "body": {**params["body"], "layers": {**layers, "attn": unbiased}}}
    assert np.abs(_hidden(zeroed, config, ids) - ours).max() > 1e-3
    for other in (
        dataclasses.replace(config, sliding_window=None, local_layers=None),
        dataclasses.replace(config, local_layers=None),
    ):  # no window / window on every layer
        changed = _hidden(params, other, ids)
        # within the window the same sums in another compiled program: float32, 3 layers, inner 64
        tol = f32_chain(3, 64, float(np.abs(ours[0, :3]).max()))
        np.testing.assert_allclose(changed[0, :3], ours[0, :3], rtol=0, atol=tol)
        assert np.abs(changed[0, 3:] - ours[0, 3:]).max() > 1e-3


def test_load_model_reads_a_qwen2_folder(tiny):
    folder, config, _, params = tiny
    model = load_model(folder)
    assert (model.family, model.objective, model.config) == ("qwen2", "causal", config)
    ids = np.random.default_rng(1).integers(3, 100, size=(2, 9))
    mask = np.ones_like(ids)
    ours = head_logits(model.head, model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden)
    direct = head_logits(
        params["head"], Forward(qwen2, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    )
    # the same Forward (compiled once per config, shared) and the same head: bit-identical
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(direct))
    assert jax.tree.structure(model.params["body"]) == jax.tree.structure(params["body"])
