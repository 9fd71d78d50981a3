"""Every causal family's tiny random checkpoint (``tests/family_specs``) against transformers: logits with
right and left padding, cached greedy decoding, packed scoring, continuations from a shared prompt (see
``tests/conformance.py``). Greedy decoding and packed scoring of every family run with the slow tests."""

import conformance
import family_specs
import numpy as np
import pytest
from family_specs import all_specs

from jaxassoc.models import load_model

SPECS = all_specs()


@pytest.fixture(scope="module", params=SPECS, ids=[s.name for s in SPECS])
def pair(tiny_checkpoint, request, tmp_path_factory):
    """(our model loaded from the saved folder, transformers' model loaded from the same folder)."""
    spec = request.param
    folder = tiny_checkpoint(spec)
    return spec, load_model(folder), family_specs.load_torch(spec, folder)


@pytest.mark.parametrize("side", ["right", "left"])
def test_logits_at_every_real_position_match_transformers(pair, side):
    spec, model, reference = pair
    seqs = conformance.sequences(model.head.W.shape[0])
    assert conformance.logits_error(model, reference, seqs, side) <= spec.atol


@pytest.mark.slow  # the default suite checks GPT-2/Llama/Mistral decoding (test_models_decoding.py)
def test_cached_greedy_decoding_equals_transformers_generate(pair):
    _, model, reference = pair
    prompts = conformance.sequences(model.head.W.shape[0], n=5, seed=1, low=1, high=9)
    assert conformance.greedy_mismatches(model, reference, prompts) == []


@pytest.mark.slow  # the default suite checks GPT-2/Llama/Mistral packing (test_models_packing.py)
def test_packed_scoring_equals_each_sequence_alone(pair):
    spec, model, reference = pair
    seqs = conformance.sequences(model.head.W.shape[0], n=9, seed=2, low=1, high=14)
    assert conformance.packed_error(model, reference, seqs) <= spec.atol


def test_continuations_from_a_shared_prompt_equal_transformers(pair):
    spec, model, reference = pair
    vocab = model.head.W.shape[0]
    prompts = conformance.sequences(vocab, n=2, seed=3, low=2, high=9)
    rng = np.random.default_rng(4)
    conts = [[rng.integers(3, vocab, k).tolist() for k in ks] for ks in ((2, 4), (4, 2))]
    assert conformance.continuations_error(model, reference, prompts, conts) <= spec.atol


EDITS_BY_DEFAULT = ("gpt2", "llama", "mistral", "gemma2")
"""The builders' paths the default suite checks bound edits on (GPT-like, llama-like, a sliding window, Gemma's
sandwich norms and soft-caps); every other spec with the slow tests (issue 38: the default suite's budget)."""


@pytest.mark.parametrize(
    "pair",
    [pytest.param(s, id=s.name, marks=() if s.name in EDITS_BY_DEFAULT else pytest.mark.slow) for s in SPECS],
    indirect=True,
)
def test_edits_bound_into_a_model_equal_the_same_edits_per_call_and_change_its_fingerprint(pair):
    """``model.with_edits`` (arrays bound into the weights' pytree) == ``interventions.run`` with the same edits,
    in the plain forward and in cached decoding; its fingerprint differs, and unbinding restores it."""
    import jax
    import jax.numpy as jnp
    from tolerances import f32_chain

    from jaxassoc.models import interventions as iv
    from jaxassoc.models.sites import Add

    _, model, _ = pair
    body = model.params["body"]
    shapes = iv.site_shapes(model.port, body, config=model.config)
    L, H, D = iv.layer_count(body), shapes["attn.heads"][0], shapes["resid_post"][-1]
    rng = np.random.default_rng(5)
    edits = {
        **iv.ablate_heads({0: [0], L - 1: [H - 1]}, L, H),
        "layers.0.resid_post": Add(jnp.asarray(rng.normal(size=(D,)), jnp.float32)),
    }
    cut = model.with_edits(edits)
    seqs = conformance.sequences(model.head.W.shape[0], n=3, seed=6)
    ids, mask = (jnp.asarray(a) for a in conformance.padded_batch(seqs, "right"))
    per_call = iv.run(model, ids, mask, edits=edits).hidden
    bound = cut.forward(cut.params["body"], ids, mask).hidden
    plain = model.forward(body, ids, mask).hidden
    real = np.asarray(mask) > 0
    tol = f32_chain(L, 4 * D, float(np.abs(np.asarray(per_call)).max()))  # two programs of the same L blocks
    np.testing.assert_allclose(np.asarray(bound)[real], np.asarray(per_call)[real], rtol=0, atol=tol)
    assert np.abs(np.asarray(bound - plain))[real].max() > 10 * tol  # the edits matter: the check can fail
    cache = cut.decoder.init_cache(ids.shape[0], ids.shape[1])
    cached, _ = jax.jit(cut.decoder.forward_cached)(cut.params["body"], ids, mask, cache, 0)
    np.testing.assert_allclose(np.asarray(cached)[real], np.asarray(bound)[real], rtol=0, atol=tol)
    assert cut.fingerprint() != model.fingerprint()
    assert cut.with_edits({}).fingerprint() == model.fingerprint()
    moved = model.with_edits({**edits, "layers.0.resid_post": Add(jnp.asarray(rng.normal(size=(D,)), jnp.float32))})
    assert moved.fingerprint() != cut.fingerprint()  # the arrays are part of the identity, not only the plan
