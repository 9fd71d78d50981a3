"""GPT-J port: checkpoint faults by tensor, the interleaved partial rotary really exercised by the
conformance spec (``tests/family_specs/gptj.py``), the biased head read or tied. Config refusals:
``tests/test_models_refusals.py``."""

import dataclasses

import conformance
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.gptj import SPECS
from safetensors.numpy import load_file
from tolerances import f32_sum

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.gptj import FAMILY as gptj
from jaxassoc.models.heads import head_logits
from jaxassoc.models.rope import apply_rope, rope_tables


def test_rotation_turns_interleaved_pairs_of_the_rotary_dims_only():
    """Dimensions (0, 1) turn by the first angle, (2, 3) by the second; dimensions past rotary_dim pass."""
    x = jnp.arange(1.0, 7.0).reshape(1, 1, 1, 6)
    cos, sin = rope_tables(jnp.array([[3]]), 4, 10000.0, jnp.float32, pairs=True)
    out = np.asarray(apply_rope(x, cos, sin, pairs=True))[0, 0, 0]
    for pair, angle in ((0, 3.0), (2, 3.0 / 100.0)):  # 10000^(-2/4) = 1/100
        a, b = float(x[0, 0, 0, pair]), float(x[0, 0, 0, pair + 1])
        expected = (a * np.cos(angle) - b * np.sin(angle), b * np.cos(angle) + a * np.sin(angle))
        # a·cos - b·sin of |a|, |b| ≤ 4 in float32 (cos, sin within an ulp): f32_sum(2, 4) absolute; rtol=1e-6
        # had been below it for the smallest outputs
        np.testing.assert_allclose(out[pair : pair + 2], expected, rtol=0, atol=f32_sum(2, 4.0))
    np.testing.assert_array_equal(out[4:], [5.0, 6.0])


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint, tmp_path_factory):
    folder = tiny_checkpoint(SPECS[0])
    return folder, load_model(folder)


@pytest.fixture(scope="module")
def tiny_logits(tiny):
    _, model = tiny
    return _logits(model, model.config)


def _logits(model, config):
    seqs = conformance.sequences(model.head.W.shape[0])
    ids, mask = conformance.padded_batch(seqs, "right")
    hidden = Forward(gptj, config)(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    return np.asarray(head_logits(model.head, hidden))[mask.astype(bool)]


@pytest.mark.parametrize("rotary_dim", [2, 16])
def test_rotary_dim_changes_the_logits(tiny, tiny_logits, rotary_dim):
    """Rotating fewer or all dims moves the logits far beyond the conformance tolerance (1e-4)."""
    _, model = tiny
    assert model.config.rotary_dim == 8
    changed = _logits(model, dataclasses.replace(model.config, rotary_dim=rotary_dim))
    assert np.abs(changed - tiny_logits).max() > 1e-2


def test_checkpoint_missing_a_tensor_names_it(tiny):
    folder, model = tiny
    tensors = load_file(folder / "model.safetensors")
    for name in ("transformer.h.1.attn.q_proj.weight", "lm_head.bias", "lm_head.weight"):
        with pytest.raises(ModelError, match=name.replace(".", r"\.")):
            gptj.params_from_hf({k: v for k, v in tensors.items() if k != name}, model.config)


def test_head_has_its_bias_and_a_tied_config_takes_wte(tiny):
    folder, model = tiny
    tensors = load_file(folder / "model.safetensors")
    np.testing.assert_array_equal(np.asarray(model.head.b), tensors["lm_head.bias"])
    tied = dataclasses.replace(model.config, tie_word_embeddings=True)
    head = gptj.params_from_hf({k: v for k, v in tensors.items() if k != "lm_head.weight"}, tied)["head"]
    np.testing.assert_array_equal(np.asarray(head.W), tensors["transformer.wte.weight"])
    np.testing.assert_array_equal(np.asarray(head.b), tensors["lm_head.bias"])
