"""Packed rows (several sequences per row, told apart by segment ids in the mask) against transformers
running each sequence alone, for every causal port: GPT-2, Llama and Mistral with a sliding window."""

import itertools

import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tolerances import f32_chain, f32_log_softmax

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models import load_model
from jaxassoc.models.base import Head
from jaxassoc.models.heads import next_token_logprobs
from jaxassoc.models.masks import positions_from_mask
from jaxassoc.models.packing import pack_rows, packed_row, run_packed

VOCAB = 97  # token ids drawn below it (the tiny models' vocabularies are larger)
SPECS = {
    "gpt2": family_specs.tiny("gpt2"),
    "llama": family_specs.tiny("llama"),
    "mistral": family_specs.tiny("mistral", num_key_value_heads=1, sliding_window=4),
}


@pytest.fixture(scope="module", params=sorted(SPECS))
def port(request, tiny_checkpoint):
    """(torch model, our jitted forward, our params) of one tiny random checkpoint."""
    spec = SPECS[request.param]
    folder = tiny_checkpoint(spec)
    model = load_model(folder)

    def forward(body, ids, mask):
        return model.forward(body, jnp.asarray(ids), jnp.asarray(mask))

    return family_specs.load_torch(spec, folder), forward, model.params


def _sequences(seed=0, n=9):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, VOCAB, size=int(k)).tolist() for k in rng.integers(1, 14, size=n)]


def test_pack_rows_places_every_sequence_once_within_the_row():
    lengths = [5, 9, 3, 12, 1, 7, 7, 2, 16, 4]
    rows = pack_rows(lengths, 16)
    assert sorted(itertools.chain(*rows)) == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in row) <= 16 for row in rows)
    assert all(row == sorted(row) for row in rows)
    # 66 tokens need at least 5 rows of 16; first-fit decreasing finds 5 here
    assert len(rows) == 5
    assert pack_rows(lengths, 16) == rows  # deterministic
    with pytest.raises(ConfigError, match="row_length=8 is shorter than a sequence of 16 tokens"):
        pack_rows(lengths, 8)


def test_positions_restart_at_each_segment():
    mask = jnp.array([[1, 1, 1, 2, 2, 3, 0, 0], [0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0, 0, 0]])
    expected = [[0, 1, 2, 0, 1, 0, 0, 0], [0, 0, 0, 1, 2, 3, 4, 5], [0, 1, 1, 1, 1, 1, 1, 1]]
    np.testing.assert_array_equal(positions_from_mask(mask), expected)


def test_packed_row_matches_each_sequence_run_alone_in_transformers(port):
    torch_model, forward, params = port
    sequences = _sequences()
    rows = pack_rows([len(s) for s in sequences], 32)
    assert any(len(r) >= 3 for r in rows)  # the test really packs
    for members in rows:
        ids, segments, starts = packed_row(sequences, members, 32, pad_id=0)
        hidden = np.asarray(forward(params["body"], ids[None], segments[None]).hidden[0])
        logp = np.asarray(
            next_token_logprobs(
                params["head"], jnp.asarray(hidden[None]), jnp.asarray(ids[None]), jnp.asarray(segments[None])
            )[0]
        )
        for m, start in zip(members, starts):
            seq = sequences[m]
            with torch.no_grad():
                out = torch_model(torch.tensor([seq]), output_hidden_states=True)
            ref_hidden = out.hidden_states[-1][0].numpy()  # after the final norm, as our ``hidden``
            # float32 vs torch float32, tiny models (2 layers + the head, inner ≤ 128): f32_chain scaled by the
            # outputs (|hidden| < 4: 2e-5; the rtol=1e-4 that came with atol=2e-5 had allowed 20x more), log p
            # by f32_log_softmax (2e-5 for |logits| < 1; atol=1e-4 had been 5x that)
            tol = f32_chain(2, 128, float(np.abs(ref_hidden).max()))
            np.testing.assert_allclose(hidden[start : start + len(seq)], ref_hidden, rtol=0, atol=tol)
            ref_logp = torch.log_softmax(out.logits[0].double(), -1)[:-1].gather(1, torch.tensor(seq[1:])[:, None])
            logits_max = float(out.logits.abs().max())  # |log p| ≤ log V + 2·max|logit|
            vocab = out.logits.shape[-1]
            tol = f32_log_softmax(vocab, f32_chain(3, 128, logits_max), np.log(vocab) + 2 * logits_max)
            np.testing.assert_allclose(logp[start : start + len(seq) - 1], ref_logp[:, 0].numpy(), rtol=0, atol=tol)
            last = start + len(seq) - 1
            if last < len(logp):
                assert logp[last] == 0.0  # nothing scored across the boundary to the next segment


def test_run_packed_returns_outputs_in_input_order(port):
    _, forward, params = port
    sequences = _sequences(seed=1, n=20)

    def fn(p, ids, segments):
        return forward(p["body"], ids, segments).hidden

    packed = run_packed(fn, params, sequences, pad_id=0, row_length=32, tokens_per_batch=64)
    # each sequence alone in its own right-padded row (a causal row's real tokens never see its padding)
    T = max(map(len, sequences))
    ids = np.array([seq + [0] * (T - len(seq)) for seq in sequences], np.int32)
    mask = np.array([[1] * len(seq) + [0] * (T - len(seq)) for seq in sequences], np.int32)
    rows = np.asarray(jax.jit(fn)(params, ids, mask))
    for seq, out, row in zip(sequences, packed, rows):
        alone = row[: len(seq)]
        assert out.shape == alone.shape
        # packed vs alone, float32, 2 layers, inner ≤ 128 (rtol=1e-4 had allowed 20x more)
        np.testing.assert_allclose(out, alone, rtol=0, atol=f32_chain(2, 128, float(np.abs(alone).max())))


def test_next_token_logprobs_is_zero_across_segments_and_padding():
    head = Head(W=jnp.eye(4, 3), b=None)
    hidden = jnp.ones((1, 6, 3))
    ids = jnp.array([[1, 2, 0, 3, 0, 0]])
    segments = jnp.array([[1, 1, 2, 2, 0, 0]])
    logp = np.asarray(next_token_logprobs(head, hidden, ids, segments))[0]
    assert logp[0] != 0.0 and logp[2] != 0.0  # within a segment
    assert logp[1] == 0.0 and logp[3] == 0.0 and logp[4] == 0.0  # into the next segment / padding


def test_run_packed_bad_input():
    fn = lambda p, ids, segments: ids  # noqa: E731
    with pytest.raises(InputError, match="sequence 1 is empty"):
        run_packed(fn, None, [[1], []], pad_id=0)
    with pytest.raises(InputError, match="sequence 0 has 70 tokens, more than the model's context of 64"):
        run_packed(fn, None, [[1] * 70], pad_id=0, max_length=64)
    with pytest.raises(ConfigError, match="row_length=128 exceeds the model's context of 64"):
        run_packed(fn, None, [[1] * 5], pad_id=0, row_length=128, max_length=64)
