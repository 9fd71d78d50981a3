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
