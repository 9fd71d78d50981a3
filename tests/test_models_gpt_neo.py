"""GPT-Neo port: checkpoint faults by tensor, and the local layers' window: the same keys as transformers'
local mask, and really exercised by the conformance spec (``tests/family_specs/gpt_neo.py``: a global then a
local layer, window 3). Config refusals: ``tests/test_models_refusals.py``."""

import dataclasses

import conformance
import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.gpt_neo import BASE, SPECS
from safetensors.numpy import load_file

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.gpt_neo import FAMILY as gpt_neo
from jaxassoc.models.heads import head_logits
from jaxassoc.models.masks import causal_allowed, positions_from_mask, window_allowed


def test_config_expands_attention_types_per_layer():
    config = gpt_neo.config_from_hf({**BASE, "num_layers": 4, "attention_types": [[["global", "local"], 2]]})
    assert config.local_layers == (False, True, False, True)  # global, local, global, local
    assert gpt_neo.new_body(config).local_layers == (False, True, False, True)


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint, tmp_path_factory):
    folder = tiny_checkpoint(SPECS[0])
    return folder, load_model(folder), family_specs.load_torch(SPECS[0], folder)


def test_local_mask_is_transformers_local_mask(tiny):
    """A local layer's query sees itself and the window_size - 1 tokens before it: transformers' buffer
    ``tril(ones) XOR tril(ones, -window_size)`` of the local layer, position for position."""
    _, model, reference = tiny
    T, window = 12, model.config.sliding_window
    theirs = reference.transformer.h[1].attn.attention.bias[0, 0, :T, :T].numpy()
    mask = jnp.ones((1, T), jnp.int32)
    positions = positions_from_mask(mask)
    ours = np.asarray(window_allowed(causal_allowed(mask), positions, positions, window))[0, 0]
    np.testing.assert_array_equal(ours, theirs)
    assert ours.sum(1).max() == window


def test_window_changes_the_logits_from_position_window_on(tiny):
    """With both layers global the logits agree on the first window_size positions and differ (far beyond the
    conformance tolerance, 1e-4) after them: the window of the local layer is doing something."""
    _, model, _ = tiny
    seqs = conformance.sequences(model.head.W.shape[0])
    ids, mask = conformance.padded_batch(seqs, "right")
    glob = dataclasses.replace(model.config, local_layers=(False, False))
    logits = {}
    for name, config in (("local", model.config), ("global", glob)):
        hidden = Forward(gpt_neo, config)(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
        logits[name] = np.asarray(head_logits(model.head, hidden))
    w = model.config.sliding_window
    diff = np.abs(logits["local"] - logits["global"])
    assert diff[:, :w].max() < 1e-5
    assert diff[:, w:][mask[:, w:].astype(bool)].max() > 1e-2


def test_checkpoint_missing_a_tensor_names_it(tiny):
    folder, model, _ = tiny
    tensors = load_file(folder / "model.safetensors")
    name = "transformer.h.1.attn.attention.out_proj.bias"
    with pytest.raises(ModelError, match=name.replace(".", r"\.")):
        gpt_neo.params_from_hf({k: v for k, v in tensors.items() if k != name}, model.config)
    assert "lm_head.weight" not in tensors  # tied: the head is a copy of wte
    np.testing.assert_array_equal(np.asarray(model.head.W), tensors["transformer.wte.weight"])
    untied = dataclasses.replace(model.config, tie_word_embeddings=False)
    with pytest.raises(ModelError, match=r"lm_head\.weight"):
        gpt_neo.params_from_hf(tensors, untied)
