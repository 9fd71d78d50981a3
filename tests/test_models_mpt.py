"""MPT port: the nested ``attn_config`` read, checkpoint faults by tensor name, ALiBi slopes equal to
transformers', transformers itself on padded batches, and the ALiBi bias and QKV clipping each changing the
result (the shared checks are in test_models_conformance.py, the config refusals, nested ``attn_config`` and
``ffn_config`` too, in test_models_refusals.py)."""

import dataclasses
import json

import conformance
import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from family_specs.mpt import SPECS
from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

from jaxassoc.errors import ModelError
from jaxassoc.models import load_model
from jaxassoc.models.checkpoint import read_weights
from jaxassoc.models.gpt_like import GPTLike, alibi_slopes
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mpt import FAMILY as mpt

SPEC = SPECS[0]


@pytest.fixture(scope="module")
def folder(tiny_checkpoint, tmp_path_factory):
    return tiny_checkpoint(SPEC)


@pytest.fixture(scope="module")
def pair(folder):
    return load_model(folder), family_specs.load_torch(SPEC, folder)


def _hf_config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_llm_foundry_default_ffn_config_is_accepted(folder):
    """llm-foundry's ffn_config, which transformers ignores: its default MLP is read (others are refused)."""
    mpt.config_from_hf(_hf_config(folder) | {"ffn_config": {"ffn_type": "mptmlp"}})


def test_config_reads_the_nested_attn_config(folder):
    config = mpt.config_from_hf(_hf_config(folder))
    assert config.clip_qkv == 0.08 and config.num_attention_heads == 6
    assert mpt.new_body(config).layers.attn.scale == pytest.approx(1 / np.sqrt(8))
    hf_config = _hf_config(folder)
    hf_config["attn_config"] = hf_config["attn_config"] | {"softmax_scale": 0.5, "clip_qkv": None}
    changed = mpt.config_from_hf(hf_config)
    assert changed.attn_scale == 0.5 and changed.clip_qkv is None


def test_missing_extra_and_misshapen_tensors_are_named(folder):
    config = mpt.config_from_hf(_hf_config(folder))
    tensors = dict(read_weights(folder).tensors)
    del tensors["transformer.blocks.1.ffn.up_proj.weight"]
    tensors["transformer.blocks.0.attn.Wqkv.weight"] = np.zeros((48, 48), np.float32)
    tensors["transformer.wpe.weight"] = np.zeros((64, 48), np.float32)  # learned positions: not MPT's ALiBi
    with pytest.raises(ModelError) as err:
        mpt.params_from_hf(tensors, config)
    message = str(err.value)
    assert "transformer.blocks.1.ffn.up_proj.weight" in message
    assert "transformer.blocks.0.attn.Wqkv.weight: found (48, 48), expected (144, 48)" in message  # (out, in) as stored
    assert "transformer.wpe.weight" in message


@pytest.mark.parametrize("heads", [1, 4, 6, 12, 16, 24])
@pytest.mark.parametrize("bias_max", [8, 16])
def test_alibi_slopes_equal_transformers(heads, bias_max):
    """transformers' ALiBi over 2 keys is ``[-slope, 0]`` per head."""
    ref = -build_mpt_alibi_tensor(heads, 2, alibi_bias_max=bias_max)[:, 0, 0].numpy()
    np.testing.assert_array_equal(alibi_slopes(heads, bias_max), ref)


@pytest.mark.parametrize("side", ["right", "left"])
def test_padded_batch_matches_transformers_on_the_same_padded_batch(pair, side):
    """transformers' ALiBi uses column indices, ours position ids: on padded rows they differ by a constant
    per query, so both give the real tokens the same logits."""
    model, reference = pair
    seqs = conformance.sequences(model.head.W.shape[0], n=4)
    ids, mask = conformance.padded_batch(seqs, side)
    hidden = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    ours = np.asarray(head_logits(model.head, hidden))
    with torch.no_grad():
        ref = reference(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(mask)).logits.numpy()
    real = mask.astype(bool)
    assert np.abs(ours - ref)[real].max() <= 1e-4


def _logits(model, config=None, **patches):
    seqs = conformance.sequences(model.head.W.shape[0], n=3)
    ids, mask = conformance.padded_batch(seqs, "right")
    # un-jitted: the tests patch the module's methods, which a compiled forward would not see
    out = mpt.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask), config=config or model.config)
    return np.asarray(head_logits(model.head, out.hidden))[mask.astype(bool)]


def test_alibi_bias_is_applied(pair, monkeypatch):
    model, _ = pair
    with_alibi = _logits(model)
    monkeypatch.setattr(GPTLike, "attention_bias", lambda self, q, k: None)
    assert np.abs(_logits(model) - with_alibi).max() > 1e-3


def test_qkv_clipping_is_applied(pair):
    model, _ = pair
    unclipped = _logits(model, dataclasses.replace(model.config, clip_qkv=None))
    assert np.abs(_logits(model) - unclipped).max() > 1e-3
