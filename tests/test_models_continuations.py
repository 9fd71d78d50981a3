"""Continuations scored from a shared prefix's key/value cache (``models.continuations``) against the full
recompute (one forward pass over prefix + continuation each), on tiny GPT-2, Llama and Mistral (a sliding
window of 3 tokens, shorter than the prompts): 1-, 2- and 4-token continuations, several packed in one
row, prefixes of different lengths left- or right-padded in one batch."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import f32_chain, f32_log_softmax

from jaxassoc.errors import InputError
from jaxassoc.models.batching import pad_batch
from jaxassoc.models.continuations import pack_continuations, prefix_and_continuations
from jaxassoc.models.heads import head_logits
from jaxassoc.models.loading import load_model

PREFIXES = ["The doctor said that he would", "She studies", "People from every country enjoy food, music and"]


@pytest.fixture(
    scope="module",
    params=["gpt2", pytest.param("llama", marks=pytest.mark.slow), pytest.param("mistral", marks=pytest.mark.slow)],
)
def model(tiny_checkpoint, request, tmp_path_factory):
    overrides = {"sliding_window": 3} if request.param == "mistral" else {}
    return load_model(tiny_checkpoint(request.param, seed=3, **overrides))


# two float32 programs on the tiny models (2 layers + the head, inner ≤ 128, |hidden| < 4, |logits| < 1, 320
# tokens, |log p| < 8): hidden states within f32_chain(2, 128, 4) = 2.2e-5, log p within
# f32_log_softmax(320, f32_chain(3, 128, 1), 8) = 2.1e-5
HIDDEN_TOL = f32_chain(2, 128, 4.0)
LOGP_TOL = f32_log_softmax(320, f32_chain(3, 128, 1.0), 8.0)


def _full_logprobs(model, prefix, tokens):
    """log P(tokens[j] | prefix, tokens[:j]) for every j from one forward pass over prefix + tokens."""
    ids = jnp.asarray([list(prefix) + list(tokens)])
    hidden = model.forward(model.params["body"], ids, jnp.ones_like(ids)).hidden[0]
    logp = jax.nn.log_softmax(head_logits(model.head, hidden).astype(jnp.float32), axis=-1)
    return np.array([logp[len(prefix) - 1 + j, t] for j, t in enumerate(tokens)])


@pytest.mark.parametrize("padding", ["left", "right"])
def test_packed_continuations_equal_the_full_recompute(model, padding):
    rng = np.random.default_rng(0)
    vocab = model.config.vocab_size
    prefixes = [model.tokenizer(p, add_special_tokens=False)["input_ids"] for p in PREFIXES]
    # per row: continuations of 1, 2 and 4 tokens, in different orders; the 1-token one is read from the
    # prefix's last state, the others are packed (1 + 3 columns) after the prefix
    conts = [[tuple(int(t) for t in rng.integers(3, vocab, k)) for k in ks] for ks in ((1, 2, 4), (4, 1, 2), (2, 4, 1))]
    P, L = max(map(len, prefixes)) + 2, 8  # extra padding columns on both sides
    ids, mask = pad_batch(prefixes, P, len(prefixes), 0, padding)
    packed = np.stack([np.stack(pack_continuations([c for c in row if len(c) > 1], L)) for row in conts], axis=1)
    fn = jax.jit(functools.partial(prefix_and_continuations, decoder=model.decoder))
    last, logprob = fn(model.params, ids, mask, *packed)
    first = jax.nn.log_softmax(head_logits(model.head, last).astype(jnp.float32), axis=-1)
    for b, (prefix, row) in enumerate(zip(prefixes, conts)):
        at = 0
        for tokens in row:
            got = [float(first[b, tokens[0]])]
            if len(tokens) > 1:
                got += list(np.asarray(logprob[b, at : at + len(tokens) - 1]))
                at += len(tokens) - 1
            expected = _full_logprobs(model, prefix, tokens)
            # δp / p = expm1(δ log p) (atol=1e-5 on p ~ 1/320 had been 100x that; rtol=1e-5 on |log p| ~ 6 had
            # added 3x LOGP_TOL)
            np.testing.assert_allclose(np.exp(got), np.exp(expected), rtol=np.expm1(LOGP_TOL), atol=0)
            np.testing.assert_allclose(got, expected, rtol=0, atol=LOGP_TOL)
        assert np.all(np.asarray(logprob[b, at:]) == 0.0)  # padding columns


def test_padding_columns_past_the_context_leave_the_scores_finite_and_exact(model):
    """More packed columns than the context has positions left (a 64-position model, 12 + 64 columns): the
    padding columns must not index the position table past its end (NaN there reached the real tokens)."""
    prefix = model.tokenizer(PREFIXES[2], add_special_tokens=False)["input_ids"]
    tokens = (5, 6, 7)
    L = model.max_positions  # prefix + L columns pass the context; the continuation itself fits
    ids, mask = pad_batch([prefix], len(prefix), 1, 0, "left")
    packed = np.stack(pack_continuations([tokens], L))[:, None]
    _, logprob = jax.jit(functools.partial(prefix_and_continuations, decoder=model.decoder))(
        model.params, ids, mask, *packed
    )
    assert np.isfinite(np.asarray(logprob)).all()
    np.testing.assert_allclose(
        np.asarray(logprob[0, :2]), _full_logprobs(model, prefix, tokens)[1:], rtol=0, atol=LOGP_TOL
    )


def test_prefix_only_when_nothing_is_packed(model):
    ids, mask = pad_batch([[5, 6, 7], [8]], 4, 2, 0, "left")
    empty = np.zeros((2, 0), np.int32)
    last, logprob = prefix_and_continuations(model.params, ids, mask, empty, empty, empty, decoder=model.decoder)
    full = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden[:, -1]
    assert logprob.shape == (2, 0)
    np.testing.assert_allclose(last, full, rtol=0, atol=HIDDEN_TOL)  # rtol=1e-4 had allowed 20x more


def test_pack_continuations_layout_and_bad_input():
    inputs, targets, segments = pack_continuations([(5, 6), (7, 8, 9)], 5)
    assert inputs.tolist() == [5, 7, 8, 0, 0]
    assert targets.tolist() == [6, 8, 9, 0, 0]
    assert segments.tolist() == [1, 2, 2, 0, 0]
    with pytest.raises(InputError, match="continuation 1 has 1 token"):
        pack_continuations([(5, 6), (7,)], 5)
    with pytest.raises(InputError, match="more than the 2 packed columns"):
        pack_continuations([(5, 6), (7, 8, 9)], 2)
