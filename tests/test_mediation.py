"""Causal mediation analysis (``metric=mediation``; Vig et al. 2020): the effects from log-odds equal their
NumPy definitions, and every head's and neuron's patched runs on tiny GPT-2 and Llama equal transformers run
with a forward hook that patches that head (neuron) from the other sentence."""

import numpy as np
import pytest
import torch
import torch_hooks
from family_specs import TINY, load_torch
from tolerances import f32_chain, f32_sum

from jaxassoc.metrics.mediation import mean_effect, relative_change
from jaxassoc.models import load_model
from jaxassoc.readouts import mediation as readout


def test_effects_are_mean_relative_changes_of_the_pronoun_ratio():
    rng = np.random.default_rng(0)
    lo_null, lo_int = rng.normal(size=7), rng.normal(size=(7, 5))
    y_null, y_int = np.exp(lo_null), np.exp(lo_int)
    # float32: exp(Δ) - 1 with Δ = lo_int - lo_null off by f32_sum(2, max|lo|) and exp by an ulp, so
    # absolute exp(max Δ)·(that + u); a mean of 7 adds f32_sum(7, max|change| / 7) (rtol=1e-5 had failed for
    # a change near 0: it cancels)
    change = y_int / y_null[:, None] - 1
    tol = np.exp((lo_int - lo_null[:, None]).max()) * (f32_sum(2, np.abs(lo_int).max()) + f32_sum(1, 1.0))
    mean_tol = tol + f32_sum(7, np.abs(change).max() / 7)
    np.testing.assert_allclose(relative_change(lo_int, lo_null), change, rtol=0, atol=tol)
    np.testing.assert_allclose(mean_effect(lo_int, lo_null), change.mean(0), rtol=0, atol=mean_tol)
    np.testing.assert_allclose(mean_effect(lo_int[:, 0], lo_null), change[:, 0].mean(), rtol=0, atol=mean_tol)


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
        logits_base, logits_alt = (ref(input_ids=ids, attention_mask=mask).logits for ids in (base, alt))
        lo_base, lo_alt = _torch_logodds(logits_base, tokens), _torch_logodds(logits_alt, tokens)
    # a log-odds is a difference of 2 logits, each float32 vs torch through 2 layers + the head (inner ≤ 128):
    # 2·f32_chain(3, 128, max|logits|), ~1.3e-5 for these tiny models (atol=1e-4 had been 8x that); patched
    # runs mix activations of the same model, of the same scale
    scale = float(max(logits_base.abs().max(), logits_alt.abs().max()))
    tol = 2 * f32_chain(3, 128, scale)
    np.testing.assert_allclose(got["lo_base"], lo_base, rtol=0, atol=tol)
    np.testing.assert_allclose(got["lo_alt"], lo_alt, rtol=0, atol=tol)
    L, H = readout.layer_and_heads(model)
    for layer in range(L):
        at_base, at_alt = (torch_hooks.head_output(ref, ids, mask, layer) for ids in (base, alt))
        for head in range(H):
            nie = torch_hooks.logits_with_head_patch(ref, base, mask, layer, head, at_alt[:, :, head])
            nde = torch_hooks.logits_with_head_patch(ref, alt, mask, layer, head, at_base[:, :, head])
            np.testing.assert_allclose(
                got["head_indirect"][:, layer * H + head], _torch_logodds(nie, tokens), rtol=0, atol=tol
            )
            got_direct = got["head_direct"][:, layer * H + head]
            np.testing.assert_allclose(got_direct, _torch_logodds(nde, tokens), rtol=0, atol=tol)
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
        np.testing.assert_allclose(neurons["neuron_indirect"][:, k], _torch_logodds(nie, tokens), rtol=0, atol=tol)
        np.testing.assert_allclose(neurons["neuron_direct"][:, k], _torch_logodds(nde, tokens), rtol=0, atol=tol)


def test_padding_rows_do_not_count_in_the_neuron_estimate(tiny_checkpoint):
    model = load_model(tiny_checkpoint("llama"))
    padded = _batch(model, n=2, size=4, seed=5)
    exact = readout.Batch(padded.base[:2], padded.alt[:2], padded.position[:2], padded.tokens[:2], 2)
    a = readout.head_runs(model, padded, neurons=True)
    b = readout.head_runs(model, exact, neurons=True)
    # other batch shapes, other programs: activations (forward, L layers) times gradients (backward from the
    # head) of the log-odds, 2L + 1 layers' rounding scaled by the estimates (rtol=1e-4 had asked nothing of
    # the estimates near 0 beyond atol=1e-7)
    L, _ = readout.layer_and_heads(model)
    tol = f32_chain(2 * L + 1, 128, float(np.abs(b["neuron_estimate"]).max()))
    np.testing.assert_allclose(a["neuron_estimate"], b["neuron_estimate"], rtol=0, atol=tol)
    assert a["head_indirect"].shape == b["head_indirect"].shape == (2, 8)
