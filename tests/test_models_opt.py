"""OPT port: checkpoint faults by tensor name, the facebook/opt-* layout without the ``model.`` prefix, and
``_remove_final_layer_norm`` (the shared checks are in test_models_conformance.py, the config refusals in
test_models_refusals.py)."""

import dataclasses
import json

import conformance
import family_specs
import jax
import numpy as np
import pytest
from family_specs.opt import SPECS

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.checkpoint import read_weights
from jaxassoc.models.mesh import device_params
from jaxassoc.models.opt import FAMILY as opt

POST_LN = next(s for s in SPECS if s.name == "opt-postln-proj")


@pytest.fixture(scope="module")
def folder(tiny_checkpoint, tmp_path_factory):
    """The post-LN, projected spec (opt-350m's layout) saved with save_pretrained."""
    return tiny_checkpoint(POST_LN)


def _hf_config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_config_reads_the_350m_layout(folder):
    config = opt.config_from_hf(_hf_config(folder))
    assert config.residual == "post" and not config.final_norm  # not do_layer_norm_before: no final LayerNorm
    assert config.word_embed_dim == 16 != config.hidden_size  # projected in and out


def test_missing_extra_and_misshapen_tensors_are_named(folder):
    config = opt.config_from_hf(_hf_config(folder))
    tensors = dict(read_weights(folder).tensors)
    del tensors["model.decoder.layers.1.fc1.bias"]
    del tensors["model.decoder.project_out.weight"]
    tensors["model.decoder.layers.0.self_attn.q_proj.weight"] = np.zeros((3, 3), np.float32)
    tensors["model.decoder.final_layer_norm.weight"] = np.zeros(32, np.float32)  # post-LN has none
    with pytest.raises(ModelError) as err:
        opt.params_from_hf(tensors, config)
    message = str(err.value)
    assert "model.decoder.layers.1.fc1.bias" in message
    assert "model.decoder.project_out.weight" in message
    assert "model.decoder.layers.0.self_attn.q_proj.weight: found (3, 3), expected (32, 32)" in message
    assert "unexpected tensors ['model.decoder.final_layer_norm.weight']" in message


def test_facebook_layout_without_model_prefix_loads_the_same(folder):
    """facebook/opt-* checkpoints name their tensors ``decoder.…`` (saved from OPTModel)."""
    config = opt.config_from_hf(_hf_config(folder))
    tensors = read_weights(folder).tensors
    ours = device_params(opt.params_from_hf(tensors, config))
    renamed = device_params(opt.params_from_hf({k.removeprefix("model."): v for k, v in tensors.items()}, config))
    assert jax.tree.structure(ours) == jax.tree.structure(renamed)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(renamed)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_removed_final_layer_norm_matches_transformers(tiny_checkpoint, tmp_path):
    """A pre-LN config with ``_remove_final_layer_norm`` has no final LayerNorm, in transformers and here."""
    spec = dataclasses.replace(
        SPECS[0], name="opt-nofinal", fields=dict(SPECS[0].fields, _remove_final_layer_norm=True)
    )
    saved = tiny_checkpoint(spec)
    reference = family_specs.load_torch(spec, saved)
    assert reference.model.decoder.final_layer_norm is None
    model = load_model(saved)
    assert "final_norm" not in model.params["body"]
    seqs = conformance.sequences(model.head.W.shape[0], n=3)
    assert conformance.logits_error(model, reference, seqs, "left") <= 1e-4
