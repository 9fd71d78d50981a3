"""T5 port (v1.1 and original T5) against transformers' ``T5ForConditionalGeneration`` (tiny random
checkpoints saved as safetensors, ``tests/family_specs/t5.py``), RPAM's encoder-decoder readout against
decoder log-probs computed here with torch, the metrics that refuse an encoder-decoder model, and a 2×4 mesh
giving the single-device results. The config refusals are in ``tests/test_models_refusals.py``."""

import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from family_specs.t5 import BASE, ORIGINAL, V11
from safetensors.numpy import load_file, save_file
from tolerances import f32_chain, f32_log_softmax

from jaxassoc.errors import ConfigError, InputError, ModelError
from jaxassoc.models import load_model
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import make_mesh
from jaxassoc.models.t5.config import config_from_hf
from jaxassoc.readouts.rpam_prompts import PromptTemplate, rpam_inputs, tokenize_attributes

SENTENCES = [
    "These words are associated: flower and",
    "The doctor said that he would help the nurse with her work today and then",
    "math",
]
# decoder rows: start token then teacher-forced ids, right-padded
DECODER = np.array([[0, 5, 7, 9, 11, 3, 40], [0, 8, 4, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0]])
DECODER_MASK = np.array([[1] * 7, [1, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]])
TP1 = PromptTemplate("tp1", "These words are associated: {target} and")
TP2 = PromptTemplate("tp2", "This sentence and this word are associated: {quote}This is {target}{quote} and {quote}")


@pytest.fixture(scope="module")
def v11(tiny_checkpoint):
    folder = tiny_checkpoint(V11)
    return folder, family_specs.load_torch(V11, folder), load_model(folder)


@pytest.fixture(scope="module")
def original(tiny_checkpoint):
    """Original T5: relu feed-forward, head tied to the embeddings with the d_model**-0.5 rescale."""
    folder = tiny_checkpoint(ORIGINAL)
    return folder, family_specs.load_torch(ORIGINAL, folder), load_model(folder)


D_FF = 48  # the widest matmul of the tiny T5s (d_model 32); 2 encoder and 2 decoder layers


def _tol(depth, ref):
    """float32 ours vs torch (or two of our programs) through ``depth`` layers (count the head), scaled by
    the compared outputs: f32_chain(depth, D_FF, max|ref|)."""
    return f32_chain(depth, D_FF, float(np.abs(np.asarray(ref)).max()))


def _logp_tol(vocab, logits_max):
    """log p over ``vocab`` from the logits of 2 + 2 layers + the head (|logit| ≤ logits_max; |log p| ≤
    log V + 2·logits_max)."""
    return f32_log_softmax(vocab, f32_chain(5, D_FF, logits_max), np.log(vocab) + 2 * logits_max)


def _compare(ref, model, padding_side):
    model.tokenizer.padding_side = padding_side
    enc = model.tokenizer(SENTENCES, padding=True, return_tensors="np")
    with torch.no_grad():
        out = ref(
            input_ids=torch.tensor(enc["input_ids"]),
            attention_mask=torch.tensor(enc["attention_mask"]),
            decoder_input_ids=torch.tensor(DECODER),
            decoder_attention_mask=torch.tensor(DECODER_MASK),
            output_hidden_states=True,
        )
    body, mask = model.params["body"], jnp.asarray(enc["attention_mask"])
    ours = model.forward(body, jnp.asarray(enc["input_ids"]), mask, all_layers=True)
    real = enc["attention_mask"].astype(bool)
    assert len(ours.layers) == len(out.encoder_hidden_states)
    # the encoder states (|h| < 5): 1e-4 had been 7x the derived 1.5e-5; the logits (|logits| up to 19 here,
    # 5 layers deep): 1e-4 had been below the derived 1.5e-4
    for depth, (a, b) in enumerate(zip(ours.layers, out.encoder_hidden_states)):  # embeddings: depth 1
        b = b.numpy()[real]
        np.testing.assert_allclose(np.asarray(a)[real], b, atol=_tol(max(depth, 1), b), rtol=0)
    b = out.encoder_last_hidden_state.numpy()[real]
    np.testing.assert_allclose(np.asarray(ours.hidden)[real], b, atol=_tol(2, b), rtol=0)
    hidden = model.port.decode(
        body, ours.hidden, mask, jnp.asarray(DECODER), jnp.asarray(DECODER_MASK), config=model.config
    ).hidden
    logits = np.asarray(head_logits(model.head, hidden))
    dec_real = DECODER_MASK.astype(bool)
    b = out.logits.numpy()[dec_real]
    np.testing.assert_allclose(logits[dec_real], b, atol=_tol(5, b), rtol=0)


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_v11_encoder_states_and_decoder_logits_match_transformers(v11, padding_side):
    _, ref, model = v11
    assert (model.family, model.objective, model.decoder) == ("t5", "seq2seq", None)
    assert model.config.gated and not model.config.scale_decoder_outputs
    assert not np.array_equal(np.asarray(model.head.W), np.asarray(model.params["body"]["shared"]))  # untied
    _compare(ref, model, padding_side)


def test_original_t5_relu_and_tied_rescaled_head_match_transformers(original):
    _, ref, model = original
    assert model.config.activation == "relu" and model.config.scale_decoder_outputs
    np.testing.assert_array_equal(np.asarray(model.head.W), np.asarray(model.params["body"]["shared"]))
    _compare(ref, model, "right")


def _reference_logprobs(ref, tokenizer, prompt, attribute_ids):
    """log p of each attribute token at decoder steps 1..k after the start token, encoder fed the prompt + EOS."""
    enc = tokenizer(prompt, return_tensors="pt")
    assert enc["input_ids"][0, -1].item() == tokenizer.eos_token_id
    with torch.no_grad():
        logits = ref(**enc, decoder_input_ids=torch.tensor([[0, *attribute_ids]])).logits[0]
    logp = torch.log_softmax(logits.double(), -1).numpy()
    return [logp[j, t] for j, t in enumerate(attribute_ids)]


@pytest.mark.parametrize("template", [TP1, TP2], ids=["tp1", "tp2"])
def test_rpam_readout_equals_decoder_logprobs(v11, template):
    _, ref, model = v11
    words = ["math", "pleasant", "unpleasant", "computer", "nurse"]
    attributes = tokenize_attributes(model.tokenizer, words, template)
    lengths = [len(ids) for ids in attributes.token_ids]
    assert 1 in lengths and 2 in lengths  # one- and two-token attributes
    targets = ["flower", "doctor", "the engineer", "flower"]
    inputs = rpam_inputs(model, targets, attributes, template, batch_size=4)
    # log p from 5 layers' logits (|logits| ~ 11 here: abs=1e-4 had been below the derived 2e-4); a
    # continuation is a mean of p, relative error expm1(δ log p) (rel=1e-4 had been below it too)
    tol = _logp_tol(model.head.W.shape[0], float(np.abs(inputs.first_logits).max()))
    for t, target in enumerate(targets):
        for c, ids in enumerate(attributes.token_ids):
            logp = _reference_logprobs(ref, model.tokenizer, template.fill(target), ids)
            assert inputs.first_logits[t, c] - inputs.log_partition[t] == pytest.approx(logp[0], rel=0, abs=tol)
            expected = np.mean(np.exp(logp[1:])) if len(ids) > 1 else 1.0
            assert inputs.continuation[t, c] == pytest.approx(expected, rel=np.expm1(tol), abs=0)


def test_rpam_reads_only_the_needed_continuations_and_refuses_bos(v11):
    _, _, model = v11
    attributes = tokenize_attributes(model.tokenizer, ["math", "computer", "nurse"], TP1)
    needed = np.array([[True, True, False], [True, False, False]])
    inputs = rpam_inputs(model, ["flower", "doctor"], attributes, TP1, needed=needed)
    assert inputs.n_continuations == 1 and np.isnan(inputs.continuation[0, 2]) and np.isnan(inputs.continuation[1, 1])
    first_only = rpam_inputs(model, ["flower", "doctor"], attributes, TP1, needed=np.zeros((2, 3), bool))
    assert first_only.n_continuations == 0 and first_only.n_sequences == 2  # decoder input: the start token only
    # two programs (decoder length 1 vs more), 2 + 2 layers + the head, |logits| ~ 8: atol=1e-5 had been
    # below the derived 1e-4 (6e-6 apart here)
    np.testing.assert_allclose(first_only.first_logits, inputs.first_logits, atol=_tol(5, inputs.first_logits))
    np.testing.assert_allclose(first_only.log_partition, inputs.log_partition, atol=_tol(5, inputs.log_partition))
    with pytest.raises(InputError, match="add_bos.*encoder-decoder"):
        rpam_inputs(model, ["flower"], attributes, TP1, add_bos=True)


def _hf_config(**changes):
    return {**BASE, **changes}


def test_v11_config_is_read_as_the_hub_writes_it():
    config = config_from_hf(_hf_config(num_decoder_layers=3, decoder_start_token_id=0))
    assert (config.activation, config.gated, config.scale_decoder_outputs, config.tie_word_embeddings) == (
        "gelu_new",
        True,
        False,
        False,
    )
    assert config.num_decoder_layers == 3
    # transformers 5 writes tie_word_embeddings=true with the scale it derived
    saved = config_from_hf(_hf_config(tie_word_embeddings=True, scale_decoder_outputs=False))
    assert not saved.scale_decoder_outputs and saved.tie_word_embeddings


@pytest.mark.parametrize(
    "name",
    [
        "lm_head.weight",
        "decoder.block.1.layer.1.EncDecAttention.k.weight",
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
    ],
)
def test_missing_tensor_is_named(v11, tmp_path, name):
    folder = tmp_path / "broken"
    folder.mkdir()
    src = v11[0]
    for f in src.iterdir():
        if f.name != "model.safetensors":
            (folder / f.name).write_bytes(f.read_bytes())
    tensors = load_file(src / "model.safetensors")
    del tensors[name]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelError, match=f"missing tensors.*{name}"):
        load_model(folder)


def test_metrics_without_an_encoder_decoder_readout_refuse(v11):
    from jaxassoc.models.decoding import greedy_generate
    from jaxassoc.readouts.unstereo import sentence_token_ids
    from jaxassoc.suites.stereotypes import score_causal
    from jaxassoc.suites.stereotypes_mlm import score_masked

    _, _, model = v11
    with pytest.raises(ModelError, match=f"UnStereoEval.*causal.*{model.name}.*seq2seq"):
        sentence_token_ids(model, ["The doctor said"])
    with pytest.raises(ConfigError, match=f"score_causal needs a causal LM; '{model.name}' is seq2seq"):
        score_causal(model, None, "x")
    with pytest.raises(ConfigError, match=f"score_masked needs a masked LM; '{model.name}' is seq2seq"):
        score_masked(model, None, "x")
    with pytest.raises(ModelError, match="seq2seq model: greedy decoding needs a causal LM"):
        greedy_generate(model, [[5, 6]], max_new_tokens=2)
    with pytest.raises(ModelError, match="t5 family is seq2seq: it has no key/value-cache decoding"):
        model.port.init_cache(model.config, 1, 4)


@pytest.mark.slow
def test_mesh_2x4_equals_one_device(v11):
    assert len(jax.devices()) == 8
    folder = v11[0]
    one, many = load_model(folder), load_model(folder, mesh=make_mesh(data=1, fsdp=2, tp=4))
    assert sum(not x.sharding.is_fully_replicated for x in jax.tree.leaves(many.params)) > 0
    ids = np.array([[5, 9, 13, 20, 1], [7, 8, 1, 0, 0]])
    mask = (np.arange(5) < np.array([[5], [3]])).astype(int)
    enc = np.abs(
        np.asarray(one.forward(one.params["body"], ids, mask).hidden)
        - np.asarray(many.forward(many.params["body"], ids, mask).hidden)
    )[mask > 0].max()
    assert enc < 1e-4
    attrs = tokenize_attributes(one.tokenizer, ["math", "computer", "nurse", "pleasant"], TP1)
    targets = ["flower", "doctor", "the engineer"]
    a = rpam_inputs(one, targets, attrs, TP1, batch_size=4)
    b = rpam_inputs(many, targets, attrs, TP1, batch_size=4, mesh=many.mesh)
    assert max(float(np.abs(getattr(a, f) - getattr(b, f)).max()) for f in ("first_logits", "log_partition")) < 1e-4
    assert float(np.abs(np.log(a.continuation) - np.log(b.continuation)).max()) < 1e-4
