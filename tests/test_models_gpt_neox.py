"""GPT-NeoX / Pythia port: checkpoint faults by tensor, and that the family's features (partial rotary, its
base, parallel residual) are really exercised by the conformance specs (``tests/family_specs/gpt_neox.py``,
checked against transformers in ``test_models_conformance.py``). Config refusals:
``tests/test_models_refusals.py``."""

import dataclasses

import conformance
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.gpt_neox import BASE, SPECS
from safetensors.numpy import load_file

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.gpt_neox import FAMILY as gpt_neox
from jaxassoc.models.heads import head_logits


def test_config_reads_transformers_4_and_5_rotary_fields():
    v4 = gpt_neox.config_from_hf({**BASE, "rotary_pct": 0.5, "rotary_emb_base": 500})
    v5 = gpt_neox.config_from_hf(
        {**BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 500, "partial_rotary_factor": 0.5}}
    )
    assert (v4.rotary_dim, v4.rope_theta) == (v5.rotary_dim, v5.rope_theta) == (8, 500.0)
    default = gpt_neox.config_from_hf(BASE)  # transformers' defaults: a quarter of the head, base 10000
    assert (default.rotary_dim, default.rope_theta, default.residual) == (4, 10000.0, "parallel")


@pytest.fixture(scope="module")
def pythia(tiny_checkpoint, tmp_path_factory):
    """The parallel-residual spec (rotary on 4 of 16 dims, base 500) saved and loaded."""
    folder = tiny_checkpoint(SPECS[0])
    return folder, load_model(folder)


@pytest.fixture(scope="module")
def pythia_logits(pythia):
    _, model = pythia
    return _logits(model, model.config)


def _logits(model, config):
    seqs = conformance.sequences(model.head.W.shape[0])
    ids, mask = conformance.padded_batch(seqs, "right")
    hidden = Forward(gpt_neox, config)(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    return np.asarray(head_logits(model.head, hidden))[mask.astype(bool)]


@pytest.mark.parametrize(
    "change",
    [dict(rotary_dim=0), dict(rotary_dim=16), dict(rope_theta=10000.0), dict(residual="sequential")],
    ids=str,
)
def test_each_feature_changes_the_logits(pythia, pythia_logits, change):
    """Rotating no / all dims, the default base or a sequential residual moves the logits far beyond the
    conformance tolerance (1e-4): the specs exercise what they claim to."""
    _, model = pythia
    assert (model.config.rotary_dim, model.config.rope_theta) == (4, 500.0)
    changed = _logits(model, dataclasses.replace(model.config, **change))
    assert np.abs(changed - pythia_logits).max() > 1e-2


def test_checkpoint_missing_a_tensor_names_it(pythia):
    folder, model = pythia
    tensors = load_file(folder / "model.safetensors")
    name = "gpt_neox.layers.1.attention.query_key_value.weight"
    with pytest.raises(ModelError, match=name.replace(".", r"\.")):
        gpt_neox.params_from_hf({k: v for k, v in tensors.items() if k != name}, model.config)
    with pytest.raises(ModelError, match=r"embed_out\.weight"):  # untied, and no head
        gpt_neox.params_from_hf({k: v for k, v in tensors.items() if k != "embed_out.weight"}, model.config)


def test_head_named_lm_head_or_tied_is_read(pythia):
    """A re-saved checkpoint naming the head ``lm_head.weight`` loads the same; a tied config without a head
    tensor takes ``embed_in``."""
    folder, model = pythia
    tensors = load_file(folder / "model.safetensors")
    renamed = {("lm_head.weight" if k == "embed_out.weight" else k): v for k, v in tensors.items()}
    head = gpt_neox.params_from_hf(renamed, model.config)["head"]
    np.testing.assert_array_equal(np.asarray(head.W), tensors["embed_out.weight"])
    tied = dataclasses.replace(model.config, tie_word_embeddings=True)
    no_head = {k: v for k, v in tensors.items() if k != "embed_out.weight"}
    np.testing.assert_array_equal(
        np.asarray(gpt_neox.params_from_hf(no_head, tied)["head"].W), tensors["gpt_neox.embed_in.weight"]
    )
