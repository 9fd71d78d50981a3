"""Gemma 2 port: a missing tensor named, and the Gemma-specific pieces really exercised (final and attention
soft-caps, the local layers' window) against transformers; the soft-capped head through every logit path
(``Head.softcap``). The shared checks are in test_models_conformance.py, the config refusals in
test_models_refusals.py."""

import dataclasses
import json

import conformance
import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from family_specs.gemma2 import BASE, SPECS
from safetensors.numpy import load_file
from tolerances import f32_chain, f32_log_softmax

from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.models import load_model
from jaxassoc.models.base import Forward
from jaxassoc.models.gemma2 import FAMILY as gemma2
from jaxassoc.models.heads import head_logits, logits_at, next_token_logprobs

SPEC = SPECS[0]


@pytest.fixture(scope="module")
def saved(tiny_checkpoint, tmp_path_factory):
    """(folder, our model, transformers' model) of the tied, soft-capped, windowed spec."""
    folder = tiny_checkpoint(SPEC)
    return folder, load_model(folder), family_specs.load_torch(SPEC, folder)


def _hf_config(**changes):
    return {**BASE, **changes}


def test_config_reads_layer_types_softcaps_and_both_rope_layouts():
    v4 = gemma2.config_from_hf(_hf_config(num_hidden_layers=3, rope_theta=500.0, attn_logit_softcapping=None))
    v5 = gemma2.config_from_hf(
        _hf_config(num_hidden_layers=3, rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    )
    assert v4.rope_theta == v5.rope_theta == 500.0
    assert v4.local_layers == (True, False, True)  # transformers' default: even layers (0, 2) are local
    assert v4.attn_logit_softcapping is None and v5.attn_logit_softcapping == 50.0
    assert v5.final_logit_softcapping == 30.0  # Gemma 2's default when the field is absent


def test_a_missing_tensor_is_named(saved, tmp_path):
    folder = saved[0]
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.layers.1.post_feedforward_layernorm.weight"]
    config = gemma2.config_from_hf(json.loads((folder / "config.json").read_text()))
    with pytest.raises(ModelError, match=r"model\.layers\.1\.post_feedforward_layernorm\.weight"):
        gemma2.params_from_hf(tensors, config)


def _logits(model, config, head, ids, mask):
    hidden = Forward(gemma2, config)(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    return np.asarray(head_logits(head, hidden), np.float64)


def _worst(logits, mask, reference, seqs):
    return max(
        float(np.abs(logits[i][mask[i] > 0] - conformance.torch_logits(reference, s)).max()) for i, s in enumerate(seqs)
    )


@pytest.mark.parametrize("without", ["final_softcap", "attn_softcap", "window"])
def test_each_gemma_feature_is_needed_to_match_transformers(saved, without):
    """Dropping the final soft-cap, the attention soft-cap or the local window moves the logits far from
    transformers' (so the conformance specs exercise each), while the full port stays within 1e-4."""
    _, model, reference = saved
    seqs = conformance.sequences(model.head.W.shape[0])
    ids, mask = conformance.padded_batch(seqs, "right")
    config, head = model.config, model.head
    assert _worst(_logits(model, config, head, ids, mask), mask, reference, seqs) <= 1e-4
    if without == "final_softcap":
        head = head._replace(softcap=None)
    elif without == "attn_softcap":
        config = dataclasses.replace(config, attn_logit_softcapping=None)
    else:
        config = dataclasses.replace(config, sliding_window=None)
    assert _worst(_logits(model, config, head, ids, mask), mask, reference, seqs) > 1e-2


def test_the_soft_cap_survives_pytree_maps_jit_grad_and_the_nnx_module(saved):
    _, model, _ = saved
    head = model.head
    assert head.softcap == SPEC.fields["final_logit_softcapping"]
    assert jax.tree.leaves(head) == [head.W]  # static: not a leaf to trace, cast or shard
    assert jax.tree.map(lambda x: x.astype(jnp.bfloat16), head).softcap == head.softcap
    hidden = jnp.full((2, head.W.shape[1]), 10.0)
    capped = jax.jit(head_logits)(head, hidden)
    assert float(jnp.abs(capped).max()) <= head.softcap  # the cap is applied (uncapped: far larger)
    assert float(jnp.abs(head_logits(head._replace(softcap=None), hidden)).max()) > head.softcap
    grad = jax.grad(lambda h: head_logits(h, hidden).sum())(head)
    assert grad.softcap == head.softcap and grad.W.shape == head.W.shape
    ids = jnp.asarray([[5, 6, 7, 8]])
    mask = jnp.ones_like(ids)
    module_logits = model.module(ids, mask)  # family.LanguageModule keeps the cap in its graph definition
    assert model.module.head.as_head().softcap == head.softcap
    # two float32 programs, 3 layers + the head, inner 64, |logits| ≤ softcap 3: f32_chain(4, 64, 3) = 2.3e-5
    # (atol=1e-5 had been below it)
    tol = f32_chain(4, 64, head.softcap)
    np.testing.assert_allclose(module_logits, _logits(model, model.config, head, ids, mask), rtol=0, atol=tol)
    at_last = logits_at(head, model.forward(model.params["body"], ids, mask).hidden, jnp.asarray([3]))
    np.testing.assert_allclose(at_last[0], module_logits[0, 3], rtol=0, atol=tol)


def test_next_token_logprobs_use_the_capped_logits(saved):
    _, model, reference = saved
    seq = conformance.sequences(model.head.W.shape[0], n=1)[0]
    ids = jnp.asarray([seq])
    hidden = model.forward(model.params["body"], ids, jnp.ones_like(ids)).hidden
    got = np.asarray(next_token_logprobs(model.head, hidden, ids, jnp.ones_like(ids)))[0]
    ref = jax.nn.log_softmax(conformance.torch_logits(reference, seq), axis=-1)
    # ours vs torch, float32: logits as above, then log-softmax over the vocabulary (|log p| ≤ log V + 2·3)
    vocab = model.head.W.shape[0]
    tol = f32_log_softmax(vocab, f32_chain(4, 64, model.head.softcap), np.log(vocab) + 2 * model.head.softcap)
    np.testing.assert_allclose(got, np.asarray(ref)[np.arange(len(seq) - 1), seq[1:]], rtol=0, atol=tol)


def test_set_refuses_a_soft_capped_head_and_ilps_runs(saved):
    from jaxassoc.suites.stereotypes import check_set_head, head_terms

    _, model, _ = saved
    with pytest.raises(ConfigError, match="final_logit_softcapping = 3.0.*metric=ilps"):
        check_set_head(model)
    x = np.asarray(np.random.default_rng(0).normal(size=(2, 1, model.head.W.shape[1])), np.float32)
    tokens, valid = np.array([[5], [9]]), np.ones((2, 1), bool)
    terms = head_terms(model, x, tokens, valid)
    logp = jax.nn.log_softmax(head_logits(model.head, jnp.asarray(x[:, 0])), axis=-1)
    # the head only (a dot of 32, capped at 3) in two programs, then log-softmax: f32_log_softmax (1.5e-5;
    # atol=1e-5 had been below it)
    vocab = model.head.W.shape[0]
    tol = f32_log_softmax(vocab, f32_chain(1, 32, model.head.softcap), np.log(vocab) + 2 * model.head.softcap)
    np.testing.assert_allclose(terms["first"], np.asarray(logp)[[0, 1], [5, 9]], rtol=0, atol=tol)
    assert np.isnan(terms["distance"]).all()
    check_set_head(model.with_params({**model.params, "head": model.head._replace(softcap=None)}))
