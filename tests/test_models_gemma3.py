"""Gemma 3 text port: the multimodal wrapper refused naming gemma3_text, a missing tensor named, and the
Gemma 3 pieces really exercised against transformers (the local layers' rotary base, the global layers'
linear rotary scaling, the window, the final soft-cap). The shared checks are in test_models_conformance.py,
the config refusals in test_models_refusals.py."""

import dataclasses
import json

import conformance
import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.gemma3 import BASE, SPECS
from safetensors.numpy import load_file

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.family import family_for
from jaxassoc.models.gemma3 import FAMILY as gemma3
from jaxassoc.models.heads import head_logits
from jaxassoc.models.rope import RopeScaling

SPEC = SPECS[0]


@pytest.fixture(scope="module")
def saved(tiny_checkpoint, tmp_path_factory):
    """(folder, our model, transformers' model) of the spec with linear scaling, a local base and a soft-cap."""
    folder = tiny_checkpoint(SPEC)
    return folder, load_model(folder), family_specs.load_torch(SPEC, folder)


def _hf_config(**changes):
    return {**BASE, **changes}


def test_config_reads_transformers_4_and_5_rotary_fields_alike():
    v4 = gemma3.config_from_hf(
        _hf_config(
            num_hidden_layers=4,
            sliding_window_pattern=2,
            rope_theta=500.0,
            rope_local_base_freq=50.0,
            rope_scaling={"type": "linear", "factor": 4.0},
        )
    )
    v5 = gemma3.config_from_hf(
        _hf_config(
            num_hidden_layers=4,
            layer_types=["sliding_attention", "full_attention"] * 2,
            rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 500.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 50.0},
            },
        )
    )
    assert v4 == v5
    assert (v4.rope_theta, v4.rope_local_theta, v4.rope_scaling) == (500.0, 50.0, RopeScaling("linear", 4.0))
    assert v4.local_layers == (True, False, True, False)
    defaults = gemma3.config_from_hf(_hf_config(num_hidden_layers=7))
    assert defaults.local_layers == (True,) * 5 + (False, True)  # sliding_window_pattern 6 by default
    assert (defaults.rope_theta, defaults.rope_local_theta, defaults.final_logit_softcapping) == (1e6, 1e4, None)


def test_the_multimodal_wrapper_is_refused_naming_gemma3_text():
    with pytest.raises(ModelError, match="model_type='gemma3'.*gemma3_text"):
        family_for("gemma3")


def test_a_missing_tensor_is_named(saved):
    folder = saved[0]
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.2.self_attn.k_norm.weight"]
    config = gemma3.config_from_hf(json.loads((folder / "config.json").read_text()))
    with pytest.raises(ModelError, match=r"model\.layers\.2\.self_attn\.k_norm\.weight"):
        gemma3.params_from_hf(tensors, config)


def _worst(model, config, head, reference, seqs):
    ids, mask = conformance.padded_batch(seqs, "left")
    hidden = Forward(gemma3, config)(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    logits = np.asarray(head_logits(head, hidden), np.float64)
    return max(
        float(np.abs(logits[i][mask[i] > 0] - conformance.torch_logits(reference, s)).max()) for i, s in enumerate(seqs)
    )


@pytest.mark.parametrize("without", ["local_base", "linear_scaling", "window", "final_softcap"])
def test_each_gemma3_feature_is_needed_to_match_transformers(saved, without):
    """Dropping the local rotary base, the linear scaling, the window or the final soft-cap moves the logits
    far from transformers' (the conformance spec exercises each); the full port stays within 1e-4."""
    _, model, reference = saved
    seqs = conformance.sequences(model.head.W.shape[0])
    config, head = model.config, model.head
    assert _worst(model, config, head, reference, seqs) <= 1e-4
    if without == "final_softcap":
        head = head._replace(softcap=None)
    else:
        change = {
            "local_base": {"rope_local_theta": config.rope_theta},
            "linear_scaling": {"rope_scaling": None},
            "window": {"sliding_window": None},
        }[without]
        config = dataclasses.replace(config, **change)
    assert _worst(model, config, head, reference, seqs) > 1e-2
