"""BERT / RoBERTa port vs transformers/torch (BertForMaskedLM, RobertaForMaskedLM, BertModel, MiniLM); config
refusals: ``tests/test_models_refusals.py``."""

import json

import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Forward
from jaxassoc.models.bert import FAMILY as bert
from jaxassoc.models.bert.modeling import position_ids
from jaxassoc.models.checkpoint import read_weights
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import device_params
from jaxassoc.resources import minilm_dir


def port(folder):
    config = bert.config_from_hf(json.loads((folder / "config.json").read_text()))
    return config, device_params(bert.params_from_hf(read_weights(folder).tensors, config))


def right_padded(vocab_size, lengths, pad_id, seed=0):
    rng = np.random.default_rng(seed)
    T = max(lengths)
    ids = np.full((len(lengths), T), pad_id, np.int64)
    mask = np.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, :n] = rng.integers(5, vocab_size, n)
        mask[row, :n] = 1
    return ids, mask


def compare(folder, family, lengths=(11, 6, 2)):
    """Max |Δ| of the head output (logits, or last hidden state without a head) and of every layer."""
    config, params = port(folder)
    ids, mask = right_padded(config.vocab_size, list(lengths), pad_id=config.padding_idx)
    with torch.no_grad():
        ref = family_specs.load_torch(family, folder)(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), output_hidden_states=True
        )
    out = Forward(bert, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask), all_layers=True)
    real = mask.astype(bool)
    if params["head"] is None:
        main = np.abs(np.asarray(out.hidden) - ref.last_hidden_state.numpy())[real].max()
    else:
        main = np.abs(np.asarray(head_logits(params["head"], out.hidden)) - ref.logits.numpy())[real].max()
    assert len(out.layers) == len(ref.hidden_states) == config.num_layers + 1
    layers = max(np.abs(np.asarray(a) - b.numpy())[real].max() for a, b in zip(out.layers, ref.hidden_states))
    return main, layers


@pytest.mark.parametrize("family", ["bert", "roberta", "bert-encoder"])
@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_matches_torch_on_right_padded_batches(tiny_checkpoint, tmp_path, family, fmt):
    main, layers = compare(tiny_checkpoint(family, seed=3, fmt=fmt), family)
    assert main <= 1e-4 and layers <= 1e-4


def test_roberta_positions_start_after_padding_idx(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("roberta", seed=4)
    config, _ = port(folder)
    assert config.padding_idx == 1 and config.max_positions == 64  # 66 rows minus padding_idx + 1
    mask = jnp.asarray([[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(position_ids(mask, config), [[2, 3, 4, 1], [2, 3, 4, 5]])
    # A sequence as long as the context uses the last position row and still matches HF.
    main, _ = compare(folder, "roberta", lengths=(64, 30))
    assert main <= 1e-4


def test_roberta_head_uses_erf_gelu_whatever_hidden_act_says(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("roberta", seed=5, hidden_act="relu")
    assert port(folder)[0].mlm_activation == "gelu"
    main, layers = compare(folder, "roberta")
    assert main <= 1e-4 and layers <= 1e-4


def test_encoder_only_checkpoint_has_no_head(tiny_checkpoint, tmp_path):
    config, params = port(tiny_checkpoint("bert-encoder", seed=6))
    assert params["head"] is None and "mlm_transform" not in params["body"]


def test_minilm_encoder_matches_transformers_bert_model():
    folder = minilm_dir()
    config, params = port(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(["The nurse helped the doctor.", "Math is hard."], padding=True, return_tensors="np")
    ids, mask = batch["input_ids"], batch["attention_mask"]
    with torch.no_grad():
        ref = transformers.BertModel.from_pretrained(folder).eval()(
            input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), output_hidden_states=True
        )
    out = Forward(bert, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask), all_layers=True)
    real = mask.astype(bool)
    assert params["head"] is None
    assert np.abs(np.asarray(out.hidden) - ref.last_hidden_state.numpy())[real].max() <= 1e-3
    for ours, theirs in zip(out.layers, ref.hidden_states):
        assert np.abs(np.asarray(ours) - theirs.numpy())[real].max() <= 1e-3


def test_decoder_is_untied_from_word_embeddings(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("bert", seed=7)
    config, params = port(folder)
    word = params["body"]["embed"]
    np.testing.assert_array_equal(params["head"].W, word)
    assert not np.shares_memory(params["head"].W, word)
    ids, mask = right_padded(config.vocab_size, [6], pad_id=0)
    hidden = Forward(bert, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    delta = np.asarray(
        head_logits(params["head"]._replace(W=jnp.asarray(params["head"].W).at[9].add(1.0)), hidden)
        - head_logits(params["head"], hidden)
    )
    assert np.abs(delta[..., 9]).min() > 0 and not delta[..., :9].any()
    np.testing.assert_array_equal(word, read_weights(folder).tensors["bert.embeddings.word_embeddings.weight"])


def test_missing_extra_and_misshapen_tensors_are_named(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("roberta", seed=8)
    config, _ = port(folder)
    tensors = dict(read_weights(folder).tensors)
    del tensors["roberta.encoder.layer.1.output.LayerNorm.weight"]
    tensors["lm_head.dense.weight"] = np.zeros((32, 7), np.float32)
    tensors["roberta.encoder.layer.2.output.dense.weight"] = np.zeros((32, 64), np.float32)
    with pytest.raises(ModelError) as err:
        bert.params_from_hf(tensors, config)
    message = str(err.value)
    assert "roberta.encoder.layer.1.output.LayerNorm.weight" in message
    assert "lm_head.dense.weight: found (32, 7), expected (32, 32)" in message  # as the checkpoint stores it
    assert "roberta.encoder.layer.2.output.dense.weight" in message


def test_untied_mlm_checkpoint_uses_its_own_decoder(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("bert", seed=9, tie_word_embeddings=False)
    config, params = port(folder)
    tensors = read_weights(folder).tensors
    np.testing.assert_array_equal(params["head"].W, tensors["cls.predictions.decoder.weight"])
    main, _ = compare(folder, "bert")
    assert main <= 1e-4
    del tensors["cls.predictions.decoder.weight"]
    with pytest.raises(ModelError, match=r"missing tensors \['cls.predictions.decoder.weight'\]"):
        bert.params_from_hf(tensors, config)
