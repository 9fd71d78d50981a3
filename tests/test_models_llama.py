"""Llama / Mistral port against transformers' torch models (tiny random checkpoints saved as safetensors:
``tests/family_specs/llama.py``). The config refusals are in ``tests/test_models_refusals.py``."""

import dataclasses
import json

import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from family_specs.llama import BASE, LOAD, PORT_DYNAMIC, PORT_LLAMA, PORT_MISTRAL
from safetensors.numpy import load_file
from tolerances import EPS32, f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.models import rope
from jaxassoc.models.base import Forward
from jaxassoc.models.heads import head_logits
from jaxassoc.models.llama import FAMILY as llama
from jaxassoc.models.mesh import device_params

VOCAB = PORT_LLAMA.fields["vocab_size"]
INNER = 96  # the widest matmul of the port and load specs (intermediate_size; hidden 64)


def _tol(depth: int, ref) -> float:
    """float32 ours vs torch's (or two of our programs) through ``depth`` layers (count the head), scaled
    by the compared outputs: f32_chain(depth, INNER, max|ref|)."""
    return f32_chain(depth, INNER, float(np.abs(np.asarray(ref)).max()))


def forward(params, ids, mask, config, all_layers=False):
    """The jitted forward pass (compiled once per config, shared with every loaded model of that config)."""
    return Forward(llama, config)(params, jnp.asarray(ids), jnp.asarray(mask), all_layers=all_layers)


def _load(tiny_checkpoint, spec):
    """(torch model, config, tensors, params) of the spec's checkpoint read back through the family API."""
    folder = tiny_checkpoint(spec)
    config = llama.config_from_hf(json.loads((folder / "config.json").read_text()))
    tensors = load_file(folder / "model.safetensors")
    return family_specs.load_torch(spec, folder), config, tensors, device_params(llama.params_from_hf(tensors, config))


@pytest.fixture(scope="module")
def tiny_llama(tiny_checkpoint):
    """GQA (4 query heads, 2 key/value heads), tied embeddings, rope_theta != default."""
    return _load(tiny_checkpoint, PORT_LLAMA)


@pytest.fixture(scope="module")
def tiny_mistral(tiny_checkpoint):
    """Sliding window 4 (sequences of 13 exceed it), one key/value head."""
    return _load(tiny_checkpoint, PORT_MISTRAL)


def _batch(T=13, seed=0):
    """Three rows: full, left-padded by 4, right-padded by 5."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(3, VOCAB, size=(3, T))
    mask = np.ones((3, T), dtype=np.int64)
    mask[1, :4] = 0
    mask[2, T - 5 :] = 0
    ids = np.where(mask == 1, ids, 0)
    return ids, mask


def _torch_reference(model, ids, mask):
    """HF logits and hidden states; position ids from the mask as generate() does for left padding."""
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor(ids),
            attention_mask=torch.tensor(mask),
            position_ids=torch.tensor(positions),
            output_hidden_states=True,
        )
    return out.logits.numpy(), [h.numpy() for h in out.hidden_states]


@pytest.mark.parametrize("which", ["tiny_llama", "tiny_mistral"])
def test_logits_and_all_layers_match_transformers(which, request):
    model, config, _, params = request.getfixturevalue(which)
    ids, mask = _batch()
    ref_logits, ref_layers = _torch_reference(model, ids, mask)
    out = forward(params["body"], ids, mask, config, all_layers=True)
    logits = np.asarray(head_logits(params["head"], out.hidden))
    real = mask.astype(bool)
    # 3 layers + the head (1e-4 had been 10x the derived 1e-5 for |logits| < 1.5)
    assert np.abs(logits - ref_logits)[real].max() <= _tol(config.num_hidden_layers + 1, ref_logits[real])
    assert len(out.layers) == len(ref_layers) == config.num_hidden_layers + 1
    for depth, (ours, ref) in enumerate(zip(out.layers, ref_layers)):  # the embeddings (exact) get depth 1
        assert np.abs(np.asarray(ours) - ref)[real].max() <= _tol(max(depth, 1), ref[real])
    np.testing.assert_array_equal(np.asarray(out.layers[-1]), np.asarray(out.hidden))


@pytest.mark.parametrize("which", ["tiny_llama", "tiny_mistral"])
def test_padding_does_not_change_real_tokens(which, request):
    """A left- or right-padded row equals the unpadded sequence run alone (positions from the mask)."""
    model, config, _, params = request.getfixturevalue(which)
    ids, mask = _batch()
    batched = forward(params["body"], ids, mask, config).hidden
    for row in (1, 2):
        real = mask[row].astype(bool)
        alone_ids = ids[row][real][None]
        alone = forward(params["body"], alone_ids, np.ones_like(alone_ids), config).hidden
        # padded vs alone, then ours vs torch: float32 through the layers (+ the head); atol=1e-5 on the
        # hidden states (|h| ~ 4) had been below the derived 2e-5
        tol = _tol(config.num_hidden_layers, alone)
        np.testing.assert_allclose(np.asarray(batched[row][real]), np.asarray(alone[0]), rtol=0, atol=tol)
        with torch.no_grad():
            ref = model(input_ids=torch.tensor(alone_ids)).logits.numpy()[0]
        tol = _tol(config.num_hidden_layers + 1, ref)
        np.testing.assert_allclose(np.asarray(head_logits(params["head"], alone[0])), ref, rtol=0, atol=tol)


def test_sliding_window_is_applied(tiny_mistral):
    """Without the window the logits beyond position 4 differ: the mask is doing something."""
    model, config, _, params = tiny_mistral
    assert config.sliding_window == 4
    ids, mask = _batch()
    full = forward(params["body"], ids, mask, config).hidden
    unwindowed = forward(params["body"], ids, mask, dataclasses.replace(config, sliding_window=None)).hidden
    # within the window the same sums, in two compiled programs: _tol (atol=1e-6 assumed one program)
    tol = _tol(config.num_hidden_layers, full[0, :4])
    np.testing.assert_allclose(np.asarray(full[0, :4]), np.asarray(unwindowed[0, :4]), rtol=0, atol=tol)
    assert np.abs(np.asarray(full[0, 4:]) - np.asarray(unwindowed[0, 4:])).max() > 1e-3


def test_tied_embeddings_are_untied(tiny_llama):
    model, config, tensors, params = tiny_llama
    assert config.tie_word_embeddings and "lm_head.weight" not in tensors  # save_pretrained dropped the tied copy
    assert config.num_key_value_heads < config.num_attention_heads
    W, embed = params["head"].W, params["body"]["embed"]
    np.testing.assert_array_equal(np.asarray(W), tensors["model.embed_tokens.weight"])
    assert W.unsafe_buffer_pointer() != embed.unsafe_buffer_pointer()
    ids, mask = _batch()
    shifted = params["head"]._replace(W=W + 1.0)
    hidden = forward(params["body"], ids, mask, config).hidden
    np.testing.assert_array_equal(np.asarray(params["body"]["embed"]), tensors["model.embed_tokens.weight"])
    assert not np.allclose(np.asarray(head_logits(shifted, hidden)), np.asarray(head_logits(params["head"], hidden)))


def test_bf16_params_run_in_bf16_and_stay_close(tiny_llama):
    _, config, _, params = tiny_llama
    ids, mask = _batch()
    body16 = jax.tree.map(lambda x: x.astype(jnp.bfloat16), params["body"])
    hidden16 = forward(body16, ids, mask, dataclasses.replace(config, activations="bfloat16")).hidden  # the policy
    hidden32 = forward(params["body"], ids, mask, config).hidden
    assert hidden16.dtype == jnp.bfloat16
    real = mask.astype(bool)
    err = np.abs(np.asarray(hidden16, dtype=np.float32) - np.asarray(hidden32))[real]
    # bf16 rounds each stored result by u = 2^-9 (XLA accumulates its dots in float32): ~10 ops in series
    # per layer, 3 layers, relative errors through the norms: √30·u ≈ 1% of max|h| rms; 0.1 is ~9σ
    assert err.max() < 0.1 * np.abs(np.asarray(hidden32)).max()


def test_forward_is_differentiable(tiny_llama):
    _, config, _, params = tiny_llama
    ids, mask = _batch()

    def loss(body):
        return forward(body, ids, mask, config).hidden.sum()

    grads = jax.grad(loss)(params["body"])
    assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))
    assert np.abs(np.asarray(grads["layers"]["attn"]["q"]["w"])).max() > 0


def test_config_accepts_transformers_4_and_5_rope_fields():
    assert llama.config_from_hf({**BASE, "rope_theta": 123.0}).rope_theta == 123.0
    v5 = {**BASE, "rope_parameters": {"rope_type": "default", "rope_theta": 7.0}}
    assert llama.config_from_hf(v5).rope_theta == 7.0
    assert llama.config_from_hf({**BASE, "sliding_window": 8}).sliding_window is None  # llama has none
    assert llama.config_from_hf({**BASE, "model_type": "mistral", "sliding_window": 8}).sliding_window == 8


LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}


@pytest.mark.parametrize(
    "fields",
    [
        {"rope_scaling": {**LLAMA3}, "rope_theta": 5e5},  # transformers 4
        {"rope_scaling": {**LLAMA3, "rope_type": None, "type": "llama3"}, "rope_theta": 5e5},  # older key
        {"rope_parameters": {**LLAMA3, "rope_theta": 5e5}},  # transformers 5
    ],
)
def test_config_reads_llama3_scaling_in_both_layouts(fields):
    config = llama.config_from_hf({**BASE, **fields})
    assert config.rope_theta == 5e5
    assert config.rope_scaling == rope.RopeScaling("llama3", 8.0, 1.0, 4.0, 64)


def test_llama3_context_defaults_to_max_position_embeddings():
    scaling = {k: v for k, v in LLAMA3.items() if k != "original_max_position_embeddings"}
    config = llama.config_from_hf({**BASE, "rope_parameters": scaling})
    assert config.rope_scaling.original_max_position_embeddings == BASE["max_position_embeddings"]


def _hf_frequencies(rope_parameters: dict, head_dim: int) -> np.ndarray:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    tiny = {k: v for k, v in BASE.items() if k not in ("model_type", "num_key_value_heads")}
    hf = transformers.LlamaConfig(**{**tiny, "head_dim": head_dim, "rope_parameters": dict(rope_parameters)})
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[rope_parameters["rope_type"]](hf)
    assert attention_factor == 1.0  # none of the implemented types scales cos/sin
    return inv_freq.numpy()


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "linear", "rope_theta": 500.0, "factor": 3.0},
        {"rope_type": "dynamic", "rope_theta": 500.0, "factor": 2.5},
        {**LLAMA3, "rope_theta": 500.0, "original_max_position_embeddings": 128},
        {**LLAMA3, "rope_theta": 5e5, "factor": 32.0, "original_max_position_embeddings": 8192},  # Llama 3.2's
    ],
    ids=["linear", "dynamic", "llama3-tiny", "llama3.2"],
)
@pytest.mark.parametrize("head_dim", [16, 64])
def test_rope_frequencies_equal_transformers(rope_parameters, head_dim):
    hf_config = {**BASE, "head_dim": head_dim, "rope_parameters": rope_parameters}
    config = llama.config_from_hf(hf_config)
    ours = rope.rope_frequencies(head_dim, config.rope_theta, config.rope_scaling)
    # elementwise float32 on both sides (no sums, no order): powf, 1 / x, the scaling's ≤ 4 ops, ≤ 1 ulp
    # (EPS32 relative) each: ≤ 8·EPS32 = 9.5e-7 apart
    np.testing.assert_allclose(ours, _hf_frequencies(rope_parameters, head_dim), rtol=8 * EPS32, atol=0)
    plain = rope.rope_frequencies(head_dim, config.rope_theta)
    np.testing.assert_allclose(
        plain,
        _hf_frequencies({"rope_type": "linear", "rope_theta": config.rope_theta, "factor": 1.0}, head_dim),
        rtol=8 * EPS32,
        atol=0,
    )
    if rope_parameters["rope_type"] == "dynamic":  # within the context NTK scaling changes nothing
        np.testing.assert_allclose(ours, plain, rtol=8 * EPS32)
    else:
        assert np.abs(ours / plain - 1).max() > 0.1


def test_llama3_scaling_has_all_three_bands():
    """The tiny llama3 case above keeps the high frequencies, divides the low ones and interpolates between."""
    scaling = rope.RopeScaling("llama3", 8.0, 1.0, 4.0, 128)
    plain = rope.rope_frequencies(16, 500.0)
    ratio = plain / rope.rope_frequencies(16, 500.0, scaling)
    assert np.isclose(ratio, 1.0).any() and np.isclose(ratio, 8.0).any()
    assert ((ratio > 1.01) & (ratio < 7.99)).any()


def test_dynamic_rope_matches_transformers_up_to_the_context():
    """Dynamic NTK only acts past max_position_embeddings; a sequence filling the whole context matches HF."""
    model, _ = family_specs.build_torch(PORT_DYNAMIC)
    hf_config = {**json.loads(model.config.to_json_string()), "model_type": "llama"}
    config = llama.config_from_hf(hf_config)
    assert config.rope_scaling == rope.RopeScaling("dynamic", 4.0)
    tensors = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    params = device_params(llama.params_from_hf(tensors, config))
    ids = np.random.default_rng(0).integers(3, VOCAB, size=(1, 16))
    hidden = forward(params["body"], ids, np.ones_like(ids), config).hidden
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(np.asarray(head_logits(params["head"], hidden)) - ref).max() <= _tol(
        config.num_hidden_layers + 1, ref
    )


def test_rope_scaling_changes_the_logits(tiny_llama):
    """The scaled config really reaches the forward pass: llama3 and linear scaling move the logits."""
    _, config, _, params = tiny_llama
    ids, mask = _batch()
    plain = forward(params["body"], ids, mask, config).hidden
    for scaling in (rope.RopeScaling("llama3", 8.0, 1.0, 4.0, 16), rope.RopeScaling("linear", 2.0)):
        scaled = forward(params["body"], ids, mask, dataclasses.replace(config, rope_scaling=scaling)).hidden
        # position 0 turns by angle 0 whatever the scaling: the same sums in another compiled program
        np.testing.assert_allclose(
            np.asarray(scaled[0, 0]), np.asarray(plain[0, 0]), rtol=0, atol=_tol(config.num_hidden_layers, plain[0, 0])
        )
        assert np.abs(np.asarray(scaled[0, 1:]) - np.asarray(plain[0, 1:])).max() > 1e-3


def test_bad_checkpoints_raise_model_error(tiny_mistral):
    _, config, tensors, _ = tiny_mistral
    missing = {k: v for k, v in tensors.items() if k != "model.layers.2.mlp.up_proj.weight"}
    with pytest.raises(ModelError, match=r"model\.layers\.2\.mlp\.up_proj\.weight"):
        llama.params_from_hf(missing, config)
    with pytest.raises(ModelError, match="model.layers.9.extra"):
        llama.params_from_hf({**tensors, "model.layers.9.extra": np.zeros(3)}, config)
    bad = dict(tensors, **{"model.norm.weight": np.zeros(7, np.float32)})
    with pytest.raises(ModelError, match=r"model\.norm\.weight: found \(7,\), expected \(64,\)"):
        llama.params_from_hf(bad, config)
    no_head = {k: v for k, v in tensors.items() if k != "lm_head.weight"}
    with pytest.raises(ModelError, match="lm_head"):
        llama.params_from_hf(no_head, config)


def test_load_model_dispatches_llama_and_mistral_folders(tiny_checkpoint):
    """load_model on save_pretrained folders (with a tokenizer) gives the same logits as torch."""
    from jaxassoc.models.loading import load_model

    tokenizer = family_specs.tiny_tokenizer("llama")
    tokenizer.pad_token = tokenizer.eos_token  # for padding the test batch only
    for spec in LOAD:
        folder = tiny_checkpoint(spec)
        model = family_specs.load_torch(spec, folder)
        lm = load_model(str(folder))
        assert (lm.family, lm.objective) == ("llama", "causal")
        assert lm.config.sliding_window == spec.fields.get("sliding_window")
        enc = tokenizer(["The doctor said that he would help", "She studies"], padding=True, return_tensors="np")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        hidden = lm.forward(lm.params["body"], ids, mask).hidden
        with torch.no_grad():
            ref = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
        real = mask.astype(bool)
        tol = _tol(lm.config.num_hidden_layers + 1, ref[real])
        assert np.abs(np.asarray(head_logits(lm.head, hidden)) - ref)[real].max() <= tol
