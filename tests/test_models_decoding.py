"""Greedy decoding with the KV cache against transformers' ``generate`` (greedy), and the cached
forward against the full forward, for every causal port (GPT-2, Llama, Mistral with a sliding window)."""

import family_specs
import numpy as np
import pytest
import torch
from tolerances import f32_chain

from jaxassoc.errors import InputError, ModelError
from jaxassoc.models.decoding import greedy_generate
from jaxassoc.models.loading import load_model

PROMPTS = ["The doctor said that", "She studies", "People from every country enjoy food, music and", "He"]


@pytest.fixture(scope="module", params=["gpt2", "llama", "mistral"])
def tiny(tiny_checkpoint, request, tmp_path_factory):
    overrides = {"sliding_window": 3} if request.param == "mistral" else {}
    folder = tiny_checkpoint(request.param, seed=5, **overrides)
    return load_model(folder), family_specs.load_torch(request.param, folder)


def _prompts(model):
    bos = [model.vocab.bos_id] if model.vocab.bos_id is not None else []
    return [bos + model.tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS]


def test_greedy_generate_matches_transformers_generate(tiny):
    model, torch_model = tiny
    prompts = _prompts(model)
    got = greedy_generate(model, prompts, max_new_tokens=12, batch_size=4)
    for prompt, new in zip(prompts, got):
        with torch.no_grad():  # one prompt at a time: no padding on the reference side
            ids = torch.tensor([prompt])
            out = torch_model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=12,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
        assert new == out[0, len(prompt) :].tolist()


def test_cached_steps_equal_the_full_forward(tiny):
    import jax.numpy as jnp

    model, _ = tiny
    ids = jnp.array([[0, 0, 7, 8, 9, 10, 11, 12], [3, 4, 5, 6, 7, 8, 9, 10]])
    mask = jnp.array([[0, 0, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]])
    full = np.asarray(model.forward(model.params["body"], ids, mask).hidden)
    dec = model.decoder
    cache = dec.init_cache(2, 8, jnp.float32)
    hidden, cache = dec.forward_cached(model.params["body"], ids[:, :5], mask, cache, 0)
    steps = [np.asarray(hidden)]
    for t in range(5, 8):
        hidden, cache = dec.forward_cached(model.params["body"], ids[:, t : t + 1], mask, cache, t)
        steps.append(np.asarray(hidden))
    got = np.concatenate(steps, axis=1)
    # cached steps vs one forward, float32, tiny models (2 layers, inner ≤ 128, |hidden| < 4): the rtol=1e-4
    # that came with atol=2e-5 had allowed 20x that
    tol = f32_chain(2, 128, float(np.abs(full).max()))
    np.testing.assert_allclose(got[0, 2:], full[0, 2:], rtol=0, atol=tol)
    np.testing.assert_allclose(got[1], full[1], rtol=0, atol=tol)


def test_stop_tokens_cut_each_row(tiny):
    model, _ = tiny
    prompts = _prompts(model)
    free = greedy_generate(model, prompts, max_new_tokens=6, batch_size=2)
    stop = np.zeros(model.head.W.shape[0], dtype=bool)
    stop[free[0][2]] = True  # the third token of row 0 stops it
    cut = greedy_generate(model, prompts, max_new_tokens=6, stop=stop, batch_size=2)
    for full_row, cut_row in zip(free, cut):
        first = next((i for i, t in enumerate(full_row) if stop[t]), None)
        assert cut_row == (full_row if first is None else full_row[: first + 1])


def test_decoding_bad_input(tiny_checkpoint, tiny, tmp_path):
    model, _ = tiny
    with pytest.raises(InputError, match="prompt 0 has 60 tokens: with max_new_tokens=8 it exceeds the 64-token"):
        greedy_generate(model, [[5] * 60], max_new_tokens=8)
    with pytest.raises(InputError, match="max_new_tokens=0"):
        greedy_generate(model, [[5]], max_new_tokens=0)
    with pytest.raises(InputError, match="boolean mask over the"):
        greedy_generate(model, [[5]], max_new_tokens=2, stop=np.zeros(3, bool))
    bert = load_model(tiny_checkpoint("bert"))
    with pytest.raises(ModelError, match="greedy decoding needs a causal LM"):
        greedy_generate(bert, [[5]], max_new_tokens=2)
