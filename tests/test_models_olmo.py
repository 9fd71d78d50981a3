"""OLMo port: checkpoint faults by tensor name, old rotary buffers ignored, and QKV clipping changing the
result (the shared checks are in test_models_conformance.py, the config refusals in
test_models_refusals.py)."""

import dataclasses
import json

import conformance
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.olmo import SPECS

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.checkpoint import read_weights
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import device_params
from jaxassoc.models.olmo import FAMILY as olmo

SPEC = next(s for s in SPECS if s.name == "olmo")


@pytest.fixture(scope="module")
def folder(tiny_checkpoint, tmp_path_factory):
    return tiny_checkpoint(SPEC)


def _hf_config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_config_reads_transformers_4_and_5_fields(folder):
    config = olmo.config_from_hf(_hf_config(folder))
    assert (config.clip_qkv, config.rope_theta, config.num_key_value_heads) == (0.05, 500.0, 2)
    v4 = {k: v for k, v in _hf_config(folder).items() if k != "rope_parameters"} | {
        "rope_theta": 123.0,
        "rope_scaling": None,
    }
    assert olmo.config_from_hf(v4).rope_theta == 123.0


def test_missing_extra_and_misshapen_tensors_are_named(folder):
    config = olmo.config_from_hf(_hf_config(folder))
    tensors = dict(read_weights(folder).tensors)
    del tensors["model.layers.1.mlp.up_proj.weight"]
    del tensors["lm_head.weight"]  # untied: the head is needed
    tensors["model.layers.0.self_attn.k_proj.weight"] = np.zeros((32, 32), np.float32)
    tensors["model.layers.0.input_layernorm.weight"] = np.ones(32, np.float32)  # OLMo's LayerNorm has none
    with pytest.raises(ModelError) as err:
        olmo.params_from_hf(tensors, config)
    message = str(err.value)
    assert "model.layers.1.mlp.up_proj.weight" in message and "lm_head.weight" in message
    assert "model.layers.0.self_attn.k_proj.weight: found (32, 32), expected (16, 32)" in message  # (out, in) as stored
    assert "unexpected tensors ['model.layers.0.input_layernorm.weight']" in message


def test_old_rotary_buffers_are_ignored(folder):
    config = olmo.config_from_hf(_hf_config(folder))
    tensors = dict(read_weights(folder).tensors)
    params = device_params(olmo.params_from_hf(tensors, config))
    tensors["model.layers.1.self_attn.rotary_emb.inv_freq"] = np.ones(4, np.float32)
    with_buffers = device_params(olmo.params_from_hf(tensors, config))
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(with_buffers)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_qkv_clipping_is_applied(folder):
    model = load_model(folder)
    ids, mask = conformance.padded_batch(conformance.sequences(model.head.W.shape[0], n=3), "right")

    def logits(config):
        out = Forward(olmo, config)(model.params["body"], jnp.asarray(ids), jnp.asarray(mask))
        return np.asarray(head_logits(model.head, out.hidden))[mask.astype(bool)]

    unclipped = logits(dataclasses.replace(model.config, clip_qkv=None))
    assert np.abs(logits(model.config) - unclipped).max() > 1e-3
