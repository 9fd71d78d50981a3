"""The precision policies (``jaxassoc.models.precision``; docs/methods.md §12): what runs in which dtype, read
from the lowered program, and how far ``mixed`` moves every family's logits from float32 and from transformers
under ``torch.autocast(bfloat16)``.

The bound: ``mixed`` rounds each product's two inputs to bfloat16 (unit roundoff u = 2⁻⁹), so one product's
relative error has standard deviation ≈ √2·u whatever its inner size (the terms' errors are independent, of
random sign), against ≈ u·√n for float32's accumulation (``tolerances.f32_chain``). A block has ~5 products in
series (q/k/v, scores, weights·values, output, MLP): σ ≈ √10·u of the output's scale; :func:`bf16_chain` allows
3σ per layer, the layers' errors adding up. transformers' autocast also rounds each product's output to
bfloat16: one more u per product, so against it the bound is doubled.
"""

from __future__ import annotations

import re

import conformance
import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from conformance import padded_batch, sequences
from family_specs import TINY, all_specs
from family_specs.t5 import V11
from tolerances import bf16_chain, model_depth

from jaxassoc.errors import ConfigError
from jaxassoc.models import load_model
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import make_mesh
from jaxassoc.models.precision import POLICIES, check_supported, policy

QUICK = ("llama", "tiny-bert")
"""The families the default suite checks; the others run with the slow tests (issue 38: the suite's budget)."""
SPECS = [
    pytest.param(s, id=s.name, marks=() if s.name in QUICK else pytest.mark.slow)
    for s in (*all_specs(), TINY["bert"], TINY["roberta"])
]
CAUSAL = {s.name for s in all_specs()}
"""The causal specs (packing and the key/value cache); the masked ones have neither."""


def _logits(model, ids, mask) -> np.ndarray:
    hidden = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    return np.asarray(head_logits(model.head, hidden), np.float64)


@pytest.fixture(scope="module", params=SPECS)
def loaded(tiny_checkpoint, request):
    spec = request.param
    folder = tiny_checkpoint(spec)
    return spec, folder, load_model(folder), load_model(folder, precision="mixed")


def test_mixed_keeps_the_weights_in_bfloat16_and_the_activations_in_float32(loaded):
    spec, _, full, mixed = loaded
    assert {str(x.dtype) for x in jax.tree.leaves(mixed.params)} == {"bfloat16"}
    assert mixed.precision == "mixed" and full.precision == "float32"
    ids, mask = padded_batch(sequences(full.head.W.shape[0], n=3), "right")
    out = mixed.forward(mixed.params["body"], jnp.asarray(ids), jnp.asarray(mask), all_layers=True)
    assert out.hidden.dtype == jnp.float32 and {x.dtype for x in out.layers} == {jnp.dtype(jnp.float32)}
    assert head_logits(mixed.head, out.hidden).dtype == jnp.float32
    assert mixed.fingerprint() != full.fingerprint()


def _lowered(model, ids, mask) -> str:
    """The StableHLO text of the jitted forward pass and full head."""
    run = jax.jit(lambda p, i, m: head_logits(p["head"], model.forward(p["body"], i, m).hidden))
    return run.lower(model.params, ids, mask).as_text()


def _dots(model, ids, mask) -> set[tuple[str, str, str]]:
    """(lhs, rhs, result) element types of every dot_general of the lowered forward and head."""
    text = _lowered(model, ids, mask)
    found = re.findall(
        r"stablehlo\.dot_general.*?: \(tensor<[0-9x]*(\w+)>, tensor<[0-9x]*(\w+)>\) -> tensor<[0-9x]*(\w+)>", text
    )
    assert found, "no dot_general in the lowered program"
    return set(found)


def test_mixed_products_take_bfloat16_inputs_and_accumulate_in_float32(loaded):
    """In the lowered program every product of ``mixed`` is bf16 x bf16 -> f32 (GPT-Neo and GPT-J compute
    their attention scores in float32, as transformers does: f32 x f32 -> f32 there); ``float32``'s are all
    f32 at ``HIGHEST`` precision (no TF32 or single bfloat16 pass on an accelerator)."""
    spec, _, full, mixed = loaded
    ids, mask = padded_batch(sequences(full.head.W.shape[0], n=2), "right")
    allowed = {("bf16", "bf16", "f32")}
    if spec.model_class.startswith(("GPTNeoFor", "GPTJFor")):
        allowed.add(("f32", "f32", "f32"))
    assert _dots(mixed, ids, mask) <= allowed and ("bf16", "bf16", "f32") in _dots(mixed, ids, mask)
    assert _dots(full, ids, mask) == {("f32", "f32", "f32")}
    text = _lowered(full, ids, mask)
    assert text.count("stablehlo.dot_general") == text.count("precision = [HIGHEST, HIGHEST]")


def test_mixed_logits_are_within_the_bound_of_float32_and_of_transformers_under_autocast(loaded):
    spec, folder, full, mixed = loaded
    seqs = sequences(full.head.W.shape[0], n=4)
    ids, mask = padded_batch(seqs, "right")
    reference, ours = _logits(full, ids, mask), _logits(mixed, ids, mask)
    real = mask.astype(bool)
    scale = float(np.abs(reference[real]).max())
    bound = bf16_chain(model_depth(full), scale)
    assert np.abs(ours - reference)[real].max() <= bound
    torch_model = family_specs.load_torch(spec, folder)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = [torch_model(torch.tensor([s])).logits[0].double().numpy() for s in seqs]
    worst = max(float(np.abs(ours[i][real[i]] - a).max()) for i, a in enumerate(autocast))
    assert worst <= 2 * bound


@pytest.mark.slow  # another compiled program per policy (issue 38: the default suite's budget)
@pytest.mark.parametrize("loaded", [s for s in SPECS if s.id in CAUSAL], indirect=True)
def test_mixed_packed_scoring_and_cached_continuations_are_within_the_bound(loaded):
    """Packing and the key/value cache (RPAM's continuations) under ``mixed`` against transformers in float32:
    a log-probability moves by at most twice its logits' bound (the picked logit and the log-sum-exp)."""
    spec, folder, full, mixed = loaded
    reference = family_specs.load_torch(spec, folder)
    seqs = sequences(full.head.W.shape[0], n=5, seed=2, low=2, high=12)
    ids, mask = padded_batch(seqs, "right")
    real = mask.astype(bool)
    bound = 2 * bf16_chain(model_depth(full), float(np.abs(_logits(full, ids, mask)[real]).max()))
    assert conformance.packed_error(mixed, reference, seqs) <= bound
    rng = np.random.default_rng(4)
    conts = [[rng.integers(3, full.head.W.shape[0], k).tolist() for k in ks] for ks in ((2, 4), (4, 2))]
    assert conformance.continuations_error(mixed, reference, seqs[:2], conts) <= bound


@pytest.mark.slow  # another compiled program per policy (issue 38: the default suite's budget)
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_mixed_on_a_2x4_mesh_is_within_the_bound_of_one_device(tiny_checkpoint, family):
    folder = tiny_checkpoint(family)
    one, many = (load_model(folder, precision="mixed", mesh=mesh) for mesh in (None, make_mesh(fsdp=2, tp=4)))
    assert {str(x.dtype) for x in jax.tree.leaves(many.params)} == {"bfloat16"}
    ids, mask = padded_batch(sequences(one.head.W.shape[0], n=4), "right")
    a, b = _logits(one, ids, mask), _logits(many, ids, mask)
    real = mask.astype(bool)
    assert np.abs(a - b)[real].max() <= bf16_chain(model_depth(one), float(np.abs(a[real]).max()))


@pytest.mark.slow  # another compiled program per policy (issue 38: the default suite's budget)
def test_t5_mixed_encoder_states_are_within_the_bound(tiny_checkpoint):
    folder = tiny_checkpoint(V11)
    full, mixed = load_model(folder), load_model(folder, precision="mixed")
    ids, mask = padded_batch(sequences(full.head.W.shape[0], n=3), "right")
    a, b = (np.asarray(m.forward(m.params["body"], ids, mask).hidden, np.float64) for m in (full, mixed))
    real = mask.astype(bool)
    assert np.abs(a - b)[real].max() <= bf16_chain(full.config.num_layers, float(np.abs(a[real]).max()))


def test_bfloat16_keeps_its_activations_in_bfloat16(tiny_checkpoint):
    model = load_model(tiny_checkpoint("llama"), precision="bfloat16")
    ids, mask = padded_batch(sequences(model.head.W.shape[0], n=2), "right")
    assert model.forward(model.params["body"], ids, mask).hidden.dtype == jnp.bfloat16
    assert model.precision == "bfloat16"
    mixed = load_model(tiny_checkpoint("llama"), precision="mixed")  # the same weights' dtype: cached apart
    assert mixed.fingerprint() != model.fingerprint()


def test_policies_and_refusals(monkeypatch):
    assert policy("auto") == POLICIES["float32"]  # the CPU's default (DEFAULTS)
    assert policy("mixed").params == "bfloat16" and policy("mixed").activations == "float32"
    with pytest.raises(ConfigError, match=r"model.precision=half is not a precision policy"):
        policy("half")
    with pytest.raises(ConfigError, match=r"model.precision=float16 is refused for gemma2: Gemma's activations"):
        check_supported(POLICIES["float16"], "gemma2")
    check_supported(POLICIES["float16"], "llama")
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")  # what auto and float16 see on a TPU host
    assert policy("auto") == POLICIES["mixed"]
    with pytest.raises(ConfigError, match=r"model.precision=float16: TPUs have no float16 matrix units"):
        check_supported(POLICIES["float16"], "llama")


def test_a_bfloat16_checkpoint_loaded_in_float32_is_said_to_be_upcast(tiny_checkpoint, tmp_path, caplog):
    folder = load_model(tiny_checkpoint("gpt2"), precision="bfloat16").save(tmp_path / "bf16")
    with caplog.at_level("INFO", logger="jaxassoc"):
        model = load_model(folder)
    assert model.precision == "float32"
    assert "bf16: weights stored in bfloat16, upcast (exact) to float32 (model.precision=float32)" in caplog.text


@pytest.mark.parametrize("precision", ["mixed", pytest.param("bfloat16", marks=pytest.mark.slow)])
def test_an_eraser_bound_into_a_model_runs_in_its_precision(tiny_checkpoint, precision):
    """A float32 eraser (a LEACE fit) bound at a block's output and the final norm: the edited states keep the
    policy's activation dtype, the sites read there are in it, and under ``mixed`` the edited logits stay within
    the bound of the same edit in float32."""
    from jaxassoc.mitigation import as_edit, fit_leace
    from jaxassoc.models.interventions import run

    folder = tiny_checkpoint("llama")
    full, low = load_model(folder), load_model(folder, precision=precision)
    x = jax.random.normal(jax.random.key(0), (64, full.config.hidden_size))
    edits = {site: as_edit(fit_leace(x, jnp.arange(64) % 2)) for site in ("layers.0.resid_post", "final_norm")}
    ids, mask = padded_batch(sequences(full.head.W.shape[0], n=3), "right")
    out = run(low.with_edits(edits), ids, mask, read=["layers.1.resid_pre"])
    activations = jnp.dtype(POLICIES[precision].activations)
    assert out.hidden.dtype == activations and out.sites["layers.1.resid_pre"].dtype == activations
    if precision == "mixed":
        a, b = (_logits(m.with_edits(edits), ids, mask) for m in (full, low))
        real = mask.astype(bool)
        assert 0 < np.abs(a - b)[real].max() <= bf16_chain(model_depth(full), float(np.abs(a[real]).max()))
