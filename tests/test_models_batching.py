"""run_batched: static-shape bucketing, order and padding restored, errors, sharding over the 8 simulated
devices ``tests/conftest.py`` starts JAX with."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxassoc.errors import InputError
from jaxassoc.models import cast_params, load_model, run_batched
from jaxassoc.models.base import Head
from jaxassoc.models.batching import bucket_length
from jaxassoc.models.multihost import data_mesh


@pytest.fixture(scope="module")
def model(tiny_checkpoint, tmp_path_factory):
    return load_model(tiny_checkpoint("gpt2", seed=0))


def hidden_fn(model):
    return jax.jit(lambda params, ids, mask: model.forward(params["body"], ids, mask).hidden)


def random_sequences(n, lengths, vocab, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(1, vocab, rng.choice(lengths)).tolist() for _ in range(n)]


def test_bucket_length():
    buckets = (16, 32, 64)
    assert [bucket_length(n, buckets, None) for n in (1, 16, 17, 64, 65, 130)] == [16, 16, 32, 64, 128, 192]
    assert [bucket_length(n, buckets, 40) for n in (1, 33, 40)] == [16, 40, 40]


@pytest.mark.parametrize("side", ["right", "left"])
def test_outputs_equal_unpadded_runs_in_input_order(model, side):
    fn = hidden_fn(model)
    sequences = random_sequences(40, [1, 16, 17, 60], model.config.vocab_size)
    outputs = run_batched(
        fn,
        model.params,
        sequences,
        batch_size=8,
        buckets=(16, 32, 64),
        pad_id=0,
        padding_side=side,
        max_length=model.max_positions,
    )
    lengths = {bucket_length(len(s), (16, 32, 64), None) for s in sequences}
    assert fn._cache_size() <= len(lengths)  # at most one compilation per bucket
    for n in {len(s) for s in sequences}:  # reference: all sequences of one length, unpadded, in one call
        rows = [i for i, s in enumerate(sequences) if len(s) == n]
        ids = jnp.asarray([sequences[i] for i in rows])
        unpadded = np.asarray(model.forward(model.params["body"], ids, jnp.ones_like(ids)).hidden)
        for row, i in enumerate(rows):
            assert outputs[i].shape == (n, model.config.hidden_size)
            # padded vs unpadded float32, tiny GPT-2 (2 layers, inner ≤ 128, |hidden| < 3):
            # f32_chain(2, 128, 3) = 1.6e-5
            np.testing.assert_allclose(outputs[i], unpadded[row], rtol=0, atol=2e-5)


def test_pytree_outputs_and_per_row_leaves(model):
    def fn(params, ids, mask):
        out = model.forward(params["body"], ids, mask)
        return {"hidden": out.hidden, "n_tokens": mask.sum(1)}

    sequences = [[3, 4, 5], [7], [8, 9, 10, 11, 12]]
    outputs = run_batched(jax.jit(fn), model.params, sequences, pad_id=0)
    assert [int(o["n_tokens"]) for o in outputs] == [3, 1, 5]
    assert [o["hidden"].shape[0] for o in outputs] == [3, 1, 5]


def test_empty_and_overlong_sequences_are_refused(model):
    fn = hidden_fn(model)
    with pytest.raises(InputError, match="sequence 1 is empty"):
        run_batched(fn, model.params, [[1, 2], []], pad_id=0)
    with pytest.raises(InputError, match="sequence 2 has 65 tokens.*context of 64"):
        run_batched(fn, model.params, [[1], [2], [3] * 65], pad_id=0, max_length=model.max_positions)
    with pytest.raises(InputError, match="no sequences"):
        run_batched(fn, model.params, [], pad_id=0)


def test_cast_params_casts_floats_only():
    params = {"body": {"w": jnp.ones((2, 2)), "ids": jnp.arange(3)}, "head": Head(W=jnp.ones((4, 2)), b=None)}
    cast = cast_params(params, jnp.bfloat16)
    assert cast["body"]["w"].dtype == jnp.bfloat16 and cast["head"].W.dtype == jnp.bfloat16
    assert cast["body"]["ids"].dtype == params["body"]["ids"].dtype and cast["head"].b is None


def test_sharded_run_over_8_devices_equals_one_device(model):
    assert len(jax.devices()) == 8, jax.devices()
    fn = hidden_fn(model)
    rng = np.random.default_rng(1)
    seqs = [rng.integers(1, 300, rng.integers(1, 30)).tolist() for _ in range(21)]
    one = run_batched(fn, model.params, seqs, batch_size=6, pad_id=0)
    many = run_batched(fn, model.params, seqs, batch_size=6, pad_id=0, mesh=data_mesh())
    assert max(float(np.abs(a - b).max()) for a, b in zip(one, many)) <= 1e-5
    with pytest.warns(DeprecationWarning, match="shard= is deprecated"):  # the alias of the last release
        old = run_batched(fn, model.params, seqs[:4], batch_size=6, pad_id=0, shard=True)
    assert max(float(np.abs(a - b).max()) for a, b in zip(old, one[:4])) <= 1e-5


def test_per_row_outputs_are_not_cut_when_asked(model):
    def fn(params, ids, mask):  # 16 scores per row: the same size as the 16-token bucket
        return jnp.broadcast_to(mask.sum(1, keepdims=True), (ids.shape[0], 16)).astype(jnp.float32)

    sequences = [[3, 4, 5], [7]]
    cut = run_batched(jax.jit(fn), model.params, sequences, pad_id=0)
    whole = run_batched(jax.jit(fn), model.params, sequences, pad_id=0, per_token=False)
    assert [c.shape for c in cut] == [(3,), (1,)]  # the default mistakes the 16 scores for tokens
    assert [w.shape for w in whole] == [(16,), (16,)] and whole[0][0] == 3 and whole[1][0] == 1


def test_out_of_range_token_ids_are_refused_before_xla(model):
    from jaxassoc.models import model_limits

    limits = model_limits(model)
    fn = hidden_fn(model)
    with pytest.raises(InputError, match=r"sequence 1 has token ids \[%d\] outside" % limits["vocab_size"]):
        run_batched(fn, model.params, [[1, 2], [3, limits["vocab_size"]]], **limits)
    with pytest.raises(InputError, match=r"sequence 0 has token ids \[-1\]"):
        run_batched(fn, model.params, [[-1]], **limits)
