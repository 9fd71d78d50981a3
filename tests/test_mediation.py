"""Causal mediation analysis (``metric=mediation``; Vig et al. 2020): the effects from log-odds equal their
NumPy definitions, and every head's and neuron's patched runs on tiny GPT-2 and Llama equal transformers run
with a forward hook that patches that head (neuron) from the other sentence."""

import numpy as np
import pytest
import torch
import torch_hooks
from family_specs import TINY, load_torch

from jaxassoc.metrics.mediation import mean_effect, relative_change
from jaxassoc.models import load_model
from jaxassoc.readouts import mediation as readout


def test_effects_are_mean_relative_changes_of_the_pronoun_ratio():
    rng = np.random.default_rng(0)
    lo_null, lo_int = rng.normal(size=7), rng.normal(size=(7, 5))
    y_null, y_int = np.exp(lo_null), np.exp(lo_int)
    np.testing.assert_allclose(relative_change(lo_int, lo_null), y_int / y_null[:, None] - 1, rtol=1e-5)
    np.testing.assert_allclose(mean_effect(lo_int, lo_null), (y_int / y_null[:, None] - 1).mean(0), rtol=1e-5)
    np.testing.assert_allclose(mean_effect(lo_int[:, 0], lo_null), (y_int[:, 0] / y_null - 1).mean(), rtol=1e-5)


def _batch(model, n, size, seed=0, T=6, position=2):
    rng = np.random.default_rng(seed)
    V = model.head.W.shape[0]
    base = rng.integers(3, V, (size, T)).astype(np.int32)
    base[n:] = base[0]  # padding rows repeat the first, as readout.batches pads
    alt = base.copy()
    alt[:, position] = (base[:, position] + 1 + rng.integers(0, V - 4, size)) % (V - 3) + 3
    alt[n:] = alt[0]
    tokens = rng.integers(3, V, (size, 2)).astype(np.int32)
    tokens[n:] = tokens[0]
    return readout.Batch(base, alt, np.full(size, position, np.int32), tokens, n)


def _torch_logodds(logits, tokens):
    last = logits[:, -1].double().numpy()
    return last[np.arange(len(tokens)), tokens[:, 0]] - last[np.arange(len(tokens)), tokens[:, 1]]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_head_and_neuron_runs_equal_transformers_with_hooks(tiny_checkpoint, family):
    folder = tiny_checkpoint(family)
    model, ref = load_model(folder), load_torch(TINY[family], folder)
    batch = _batch(model, n=3, size=4)
    got = readout.head_runs(model, batch, neurons=True)
    n = batch.n
    base, alt = torch.tensor(batch.base[:n], dtype=torch.long), torch.tensor(batch.alt[:n], dtype=torch.long)
    mask = torch.ones_like(base)
    tokens = batch.tokens[:n]
    with torch.inference_mode():
        lo_base = _torch_logodds(ref(input_ids=base, attention_mask=mask).logits, tokens)
        lo_alt = _torch_logodds(ref(input_ids=alt, attention_mask=mask).logits, tokens)
    np.testing.assert_allclose(got["lo_base"], lo_base, atol=1e-4)
    np.testing.assert_allclose(got["lo_alt"], lo_alt, atol=1e-4)
    L, H = readout.layer_and_heads(model)
    for layer in range(L):
        at_base, at_alt = (torch_hooks.head_output(ref, ids, mask, layer) for ids in (base, alt))
        for head in range(H):
            nie = torch_hooks.logits_with_head_patch(ref, base, mask, layer, head, at_alt[:, :, head])
            nde = torch_hooks.logits_with_head_patch(ref, alt, mask, layer, head, at_base[:, :, head])
            np.testing.assert_allclose(
                got["head_indirect"][:, layer * H + head], _torch_logodds(nie, tokens), atol=1e-4
            )
            np.testing.assert_allclose(got["head_direct"][:, layer * H + head], _torch_logodds(nde, tokens), atol=1e-4)
    selected = readout.top_neurons(got["neuron_estimate"], 2)
    assert selected.shape == (2 * L, 2)
    neurons = readout.neuron_runs(model, batch, selected)
    position = batch.position[:n]
    for k, (layer, neuron) in enumerate(selected):
        hidden = {name: torch_hooks.mlp_hidden(ref, ids, mask, layer) for name, ids in (("base", base), ("alt", alt))}
        at = np.arange(n), position
        nie = torch_hooks.logits_with_neuron_patch(
            ref, base, mask, layer, neuron, hidden["alt"][at][:, neuron], position
        )
        nde = torch_hooks.logits_with_neuron_patch(
            ref, alt, mask, layer, neuron, hidden["base"][at][:, neuron], position
        )
        np.testing.assert_allclose(neurons["neuron_indirect"][:, k], _torch_logodds(nie, tokens), atol=1e-4)
        np.testing.assert_allclose(neurons["neuron_direct"][:, k], _torch_logodds(nde, tokens), atol=1e-4)


def test_padding_rows_do_not_count_in_the_neuron_estimate(tiny_checkpoint):
    model = load_model(tiny_checkpoint("llama"))
    padded = _batch(model, n=2, size=4, seed=5)
    exact = readout.Batch(padded.base[:2], padded.alt[:2], padded.position[:2], padded.tokens[:2], 2)
    a = readout.head_runs(model, padded, neurons=True)
    b = readout.head_runs(model, exact, neurons=True)
    np.testing.assert_allclose(a["neuron_estimate"], b["neuron_estimate"], rtol=1e-4, atol=1e-7)
    assert a["head_indirect"].shape == b["head_indirect"].shape == (2, 8)
