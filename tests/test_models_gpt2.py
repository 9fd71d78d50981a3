"""GPT-2 port vs the transformers/torch GPT2LMHeadModel on tiny random checkpoints (config refusals:
``tests/test_models_refusals.py``)."""

import json

import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tolerances import f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Forward
from jaxassoc.models.checkpoint import read_weights
from jaxassoc.models.gpt2 import FAMILY as gpt2
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import device_params


@pytest.fixture(scope="module")
def folder(tiny_checkpoint, tmp_path_factory):
    return tiny_checkpoint("gpt2", seed=0)


def port(folder):
    config = gpt2.config_from_hf(json.loads((folder / "config.json").read_text()))
    return config, device_params(gpt2.params_from_hf(read_weights(folder).tensors, config))


def padded_batch(vocab_size, lengths, T, side, seed=0):
    rng = np.random.default_rng(seed)
    ids = np.zeros((len(lengths), T), np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        span = slice(0, n) if side == "right" else slice(T - n, T)
        ids[row, span] = rng.integers(1, vocab_size, n)
        mask[row, span] = 1
    return ids, mask


def torch_outputs(model, ids, mask):
    """HF reference; position ids from the mask, as HF's generate() builds them for left padding."""
    positions = np.maximum(np.cumsum(mask, 1) - 1, 0)
    with torch.no_grad():
        return model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            position_ids=torch.tensor(positions),
            output_hidden_states=True,
        )


@pytest.mark.parametrize("side", ["right", "left"])
def test_logits_and_layers_match_torch_on_padded_batches(folder, side):
    config, params = port(folder)
    ids, mask = padded_batch(config.vocab_size, [12, 7, 1, 10], T=12, side=side)
    ref = torch_outputs(family_specs.load_torch("gpt2", folder), ids, mask)
    out = Forward(gpt2, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask), all_layers=True)
    real = mask.astype(bool)
    logits = np.asarray(head_logits(params["head"], out.hidden))
    # float32 ours vs torch through the layers (+ the head), inner ≤ 128 (the MLP, 4 x 32), scaled by the
    # compared outputs: f32_chain (1e-4 had been 30x the derived 3e-6 for the logits, |logits| < 0.4)
    ref_logits = ref.logits.numpy()[real]
    tol = f32_chain(config.num_hidden_layers + 1, 128, float(np.abs(ref_logits).max()))
    assert np.abs(logits[real] - ref_logits).max() <= tol
    assert len(out.layers) == len(ref.hidden_states) == config.num_hidden_layers + 1
    for depth, (ours, theirs) in enumerate(zip(out.layers, ref.hidden_states)):  # the embeddings get depth 1
        theirs = theirs.numpy()[real]
        assert np.abs(np.asarray(ours)[real] - theirs).max() <= f32_chain(max(depth, 1), 128, np.abs(theirs).max())
    assert np.isfinite(logits).all()  # padding rows stay finite (no NaN from fully masked attention)


def test_padding_side_does_not_change_real_tokens(folder):
    config, params = port(folder)
    lengths = [9, 4]
    right = gpt2.forward(
        params["body"], *map(jnp.asarray, padded_batch(config.vocab_size, lengths, 9, "right")), config=config
    ).hidden
    left = gpt2.forward(
        params["body"], *map(jnp.asarray, padded_batch(config.vocab_size, lengths, 9, "left")), config=config
    ).hidden
    # two float32 programs, 2 layers, inner ≤ 128, |hidden| < 3: f32_chain(2, 128, 3) = 1.6e-5 (atol=1e-5 had
    # been below it)
    tol = f32_chain(2, 128, float(np.abs(np.asarray(left)[1, 5:]).max()))
    np.testing.assert_allclose(np.asarray(right)[1, :4], np.asarray(left)[1, 5:], rtol=0, atol=tol)


def test_bin_checkpoint_with_tied_copy_loads_the_same(tiny_checkpoint, tmp_path, folder):
    bin_folder = tiny_checkpoint("gpt2", seed=0, fmt="bin")
    assert "lm_head.weight" in read_weights(bin_folder).tensors  # the tied copy is present in the .bin
    _, a = port(folder)
    _, b = port(bin_folder)
    np.testing.assert_array_equal(a["head"].W, b["head"].W)
    np.testing.assert_array_equal(a["body"]["layers"]["attn"]["q"]["w"], b["body"]["layers"]["attn"]["q"]["w"])


def test_head_is_untied_from_input_embeddings(folder):
    config, params = port(folder)
    np.testing.assert_array_equal(params["head"].W, params["body"]["embed"])
    W = jnp.asarray(params["head"].W).at[5].add(1.0)
    assert not np.shares_memory(params["head"].W, params["body"]["embed"])
    ids, mask = padded_batch(config.vocab_size, [6], 6, "right")
    hidden = Forward(gpt2, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    before = head_logits(params["head"], hidden)
    after = head_logits(params["head"]._replace(W=W), hidden)
    assert np.abs(np.asarray(after - before))[..., 5].min() > 0  # only the perturbed row's logit moves
    np.testing.assert_array_equal(np.asarray(after - before)[..., :5], 0.0)
    np.testing.assert_array_equal(params["body"]["embed"], read_weights(folder).tensors["transformer.wte.weight"])


def test_separate_lm_head_is_used(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("gpt2", seed=1, tie_word_embeddings=False)
    config, params = port(folder)
    tensors = read_weights(folder).tensors
    np.testing.assert_array_equal(params["head"].W, tensors["lm_head.weight"])
    assert not np.array_equal(params["head"].W, params["body"]["embed"])
    ids, mask = padded_batch(config.vocab_size, [5, 3], 5, "right")
    ref = torch_outputs(family_specs.load_torch("gpt2", folder), ids, mask)
    logits = head_logits(params["head"], Forward(gpt2, config)(params["body"], ids, mask).hidden)
    assert np.abs(np.asarray(logits) - ref.logits.numpy())[mask.astype(bool)].max() <= 1e-4


def test_missing_extra_and_misshapen_tensors_are_named(folder):
    config, _ = port(folder)
    tensors = dict(read_weights(folder).tensors)
    del tensors["transformer.h.1.mlp.c_fc.bias"]
    tensors["transformer.h.0.attn.c_proj.weight"] = np.zeros((3, 3), np.float32)
    tensors["transformer.extra.weight"] = np.zeros(2, np.float32)
    with pytest.raises(ModelError) as err:
        gpt2.params_from_hf(tensors, config)
    message = str(err.value)
    assert "transformer.h.1.mlp.c_fc.bias" in message
    assert "transformer.h.0.attn.c_proj.weight: found (3, 3), expected (32, 32)" in message
    assert "transformer.extra.weight" in message


def test_old_checkpoint_buffers_and_missing_prefix_are_accepted(folder):
    config, reference = port(folder)
    tensors = {k.removeprefix("transformer."): v for k, v in read_weights(folder).tensors.items()}
    tensors["h.0.attn.bias"] = np.tril(np.ones((1, 1, 64, 64), np.float32))
    tensors["h.1.attn.masked_bias"] = np.array(-1e4, np.float32)
    params = device_params(gpt2.params_from_hf(tensors, config))
    np.testing.assert_array_equal(params["body"]["final_norm"]["scale"], reference["body"]["final_norm"]["scale"])
