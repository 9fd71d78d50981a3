"""load_model: folders (safetensors, sharded, .bin), embedded models, hub ids, dispatch and its errors."""

import hashlib
import json
import shutil
import sys

import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxassoc.errors import ConfigError, ModelError
from jaxassoc.models import LanguageModel, load_model
from jaxassoc.models.heads import head_logits


@pytest.fixture(scope="module")
def gpt2_folder(tiny_checkpoint, tmp_path_factory):
    return tiny_checkpoint("gpt2", seed=0)


def logits(model: LanguageModel, ids, mask):
    return np.asarray(head_logits(model.head, model.forward(model.params["body"], ids, mask).hidden))


@pytest.mark.parametrize("fmt", ["safetensors", "sharded", "bin"])
def test_loaded_gpt2_matches_torch_and_records_provenance(tiny_checkpoint, tmp_path, fmt):
    folder = tiny_checkpoint("gpt2", seed=2, fmt=fmt)
    model = load_model(folder)
    assert (model.family, model.objective, model.max_positions) == ("gpt2", "causal", 64)
    assert model.name == folder.name and model.provenance.source == str(folder.resolve())
    assert model.provenance.file_format == ("pytorch" if fmt == "bin" else "safetensors")
    weight_files = sorted(folder.glob("*.safetensors")) or [folder / "pytorch_model.bin"]
    digest = hashlib.sha256(b"".join(f.read_bytes() for f in weight_files)).hexdigest()
    assert model.provenance.weights_sha256 == digest
    tokenizer_json = json.loads((folder / "tokenizer.json").read_text())
    assert model.tokenizer.backend_tokenizer.get_vocab_size() == len(tokenizer_json["model"]["vocab"])
    ids = np.asarray(model.tokenizer(["The doctor said that he would help"])["input_ids"])
    mask = np.ones_like(ids)
    with torch.no_grad():
        ref = family_specs.load_torch("gpt2", folder)(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(logits(model, ids, mask) - ref).max() <= 1e-4


def test_vocab_info_per_tokenizer_kind(tiny_checkpoint, tmp_path):
    gpt2 = load_model(tiny_checkpoint("gpt2")).vocab
    assert (gpt2.word_initial_marker, gpt2.continuation_marker, gpt2.add_bos, gpt2.mask_id) == ("Ġ", None, False, None)
    roberta = load_model(tiny_checkpoint("roberta"))
    assert roberta.vocab.add_bos and roberta.vocab.word_initial_marker == "Ġ"
    assert roberta.vocab.mask_id == roberta.tokenizer.convert_tokens_to_ids("<mask>")
    assert roberta.vocab.pad_id == 1 and roberta.family == "roberta" and roberta.objective == "masked"
    bert = load_model(tiny_checkpoint("bert")).vocab
    assert (bert.word_initial_marker, bert.continuation_marker, bert.bos_id) == (None, "##", None)


def test_embedded_minilm_encoder():
    model = load_model("minilm-l6")
    assert model.name == "minilm-l6" and model.provenance.source == "minilm-l6"
    assert model.head is None and model.family == "bert" and model.max_positions == 512
    assert model.vocab.mask_id == 103 and model.vocab.continuation_marker == "##"
    batch = model.tokenizer(["a short sentence"], return_tensors="np")
    hidden = model.forward(model.params["body"], batch["input_ids"], batch["attention_mask"]).hidden
    assert hidden.shape == (1, batch["input_ids"].shape[1], 384)


def test_tokenizer_hash_is_stable_and_weights_hash_tracks_weights(tiny_checkpoint, tmp_path, gpt2_folder):
    a, b = load_model(gpt2_folder), load_model(gpt2_folder)
    other = load_model(tiny_checkpoint("gpt2", seed=9))
    assert a.provenance.tokenizer_sha256 == b.provenance.tokenizer_sha256 == other.provenance.tokenizer_sha256
    assert a.provenance.weights_sha256 == b.provenance.weights_sha256 != other.provenance.weights_sha256


def test_bfloat16_params(gpt2_folder):
    model = load_model(gpt2_folder, precision="bfloat16")
    assert model.params["body"]["embed"].dtype == jnp.bfloat16 and model.head.W.dtype == jnp.bfloat16
    ref = load_model(gpt2_folder)
    ids, mask = np.array([[5, 9, 30, 2]]), np.ones((1, 4), np.int32)
    low, high = logits(model, ids, mask).astype(np.float32), logits(ref, ids, mask)
    assert np.abs(low - high).max() < 0.1 * np.abs(high).max()
    with pytest.raises(ConfigError, match=r"model.precision=float8 is not a precision policy"):
        load_model(gpt2_folder, precision="float8")


def test_unknown_model_type_lists_supported(tmp_path, gpt2_folder):
    folder = tmp_path / "xlnet"
    shutil.copytree(gpt2_folder, folder)
    config = json.loads((folder / "config.json").read_text()) | {"model_type": "xlnet"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=r"'xlnet'.*supported.*'bert'.*'gpt2'.*'roberta'"):
        load_model(folder)


def test_hub_id_offline_says_it_needs_network(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError, match=r"'someorg/tiny-model'.*network.*local checkpoint folder"):
        load_model("someorg/tiny-model", revision="main")


def test_missing_path_and_folder_without_config(tmp_path):
    with pytest.raises(ModelError, match="does not exist"):
        load_model(tmp_path / "nowhere")
    with pytest.raises(ModelError, match="does not exist"):
        load_model("./nowhere/model.gguf")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        load_model(tmp_path / "empty")


def test_bin_without_torch_says_how_to_fix(tiny_checkpoint, tmp_path, monkeypatch):
    folder = tiny_checkpoint("bert", fmt="bin")
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(ModelError, match="install torch.*safetensors"):
        load_model(folder)


def test_sharded_equals_single_file(tiny_checkpoint, tmp_path):
    single = load_model(tiny_checkpoint("roberta", seed=1))
    sharded = load_model(tiny_checkpoint("roberta", seed=1, fmt="sharded"))
    ids, mask = np.array([[0, 40, 50, 60, 2]]), np.ones((1, 5), np.int32)
    np.testing.assert_array_equal(logits(single, ids, mask), logits(sharded, ids, mask))


def test_llama_folder_dispatches_to_the_llama_port(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("llama", seed=3)
    model = load_model(folder)
    assert (model.family, model.objective, model.vocab.add_bos) == ("llama", "causal", True)
    ids = np.asarray(model.tokenizer(["She studies math and science"])["input_ids"])
    with torch.no_grad():
        ref = family_specs.load_torch("llama", folder)(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(logits(model, ids, np.ones_like(ids)) - ref).max() <= 1e-4


@pytest.mark.slow  # loads the embedded SmolLM2: ~6 s (issue 38: the default suite's budget)
def test_embedded_gguf_smollm2():
    from jaxassoc.resources import smollm2_gguf

    model = load_model("smollm2-135m")
    assert (model.family, model.provenance.file_format, model.name) == ("llama", "gguf", "smollm2-135m")
    assert model.provenance.weights_sha256 == hashlib.sha256(smollm2_gguf().read_bytes()).hexdigest()
    # docs/methods.md §1: SmolLM2's GGUF names <|im_start|> as BOS and does not add it by default.
    assert model.vocab.bos_id == model.tokenizer.convert_tokens_to_ids("<|im_start|>") and not model.vocab.add_bos


def test_hub_id_resolves_from_the_hub_cache_and_records_the_commit(tmp_path, gpt2_folder, monkeypatch):
    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someorg--tiny-gpt2"
    shutil.copytree(gpt2_folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    model = load_model("someorg/tiny-gpt2")
    assert (model.name, model.provenance.source, model.provenance.revision) == (
        "someorg/tiny-gpt2",
        "someorg/tiny-gpt2",
        commit,
    )
    np.testing.assert_array_equal(model.head.W, load_model(gpt2_folder).head.W)


def test_bfloat16_safetensors_read_without_torch(tmp_path):
    from safetensors.torch import save_file

    from jaxassoc.models.checkpoint import read_safetensors

    tensors = {"a": torch.randn(3, 5, dtype=torch.bfloat16), "b": torch.arange(4, dtype=torch.int64)}
    save_file(tensors, tmp_path / "w.safetensors")
    read = read_safetensors(tmp_path / "w.safetensors")
    assert str(read["a"].dtype) == "bfloat16" and read["a"].shape == (3, 5)
    np.testing.assert_array_equal(read["a"].astype(np.float32), tensors["a"].float().numpy())
    np.testing.assert_array_equal(read["b"], [0, 1, 2, 3])


def test_progress_bar_over_weight_files_only_when_asked(tiny_checkpoint, tmp_path, capsys):
    folder = tiny_checkpoint("gpt2", fmt="sharded")
    load_model(folder)
    assert "reading" not in capsys.readouterr().err
    model = load_model(folder, progress=True)
    err = capsys.readouterr().err
    n_files = len(list(folder.glob("*.safetensors")))
    assert n_files > 1 and f"reading {folder.name}" in err and f"/{n_files} " in err
    assert isinstance(model, LanguageModel)


# --- broken folders and corrupt files: a ModelError naming the file and what is wrong ----------------


def _copy(gpt2_folder, tmp_path, name="broken"):
    folder = tmp_path / name
    shutil.copytree(gpt2_folder, folder)
    return folder


def test_folder_without_tokenizer_files_is_refused_naming_them(tmp_path, gpt2_folder):
    folder = _copy(gpt2_folder, tmp_path)
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"):
        (folder / f).unlink(missing_ok=True)
    with pytest.raises(
        ModelError,
        match=r"broken has no tokenizer: it needs tokenizer\.json, or vocab\.json \+ "
        r"merges\.txt, vocab\.txt or tokenizer\.model",
    ):
        load_model(folder)
    (folder / "vocab.json").write_text("{}")
    with pytest.raises(ModelError, match=r"found only \['vocab\.json'\]"):
        load_model(folder)


@pytest.mark.parametrize("field, value", [("n_head", "four"), ("tie_word_embeddings", None)])
def test_a_config_field_transformers_rejects_is_blamed_on_config_json(tmp_path, gpt2_folder, field, value):
    folder = _copy(gpt2_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(ModelError, match=rf"^{folder}/config\.json is rejected by transformers \(.*'{field}'") as e:
        load_model(folder)
    assert "tokenizer" not in str(e.value)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [("vocab_size", -5, "vocab_size=-5"), ("n_head", 0, "n_head=0"), ("n_positions", -3, "n_positions=-3")],
)
def test_a_size_that_cannot_be_is_named_not_an_xla_error(tmp_path, gpt2_folder, field, value, named):
    folder = _copy(gpt2_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(ModelError, match=rf"the gpt2 config's {named} \(from the checkpoint's config\) must be >= "):
        load_model(folder)


@pytest.mark.parametrize(
    "cut, problem",
    [
        (0, "it is 0 bytes long"),
        (5, "it is 5 bytes long"),
        (100, r"the header claims \d+ bytes but the file has 100"),
        (
            0.5,
            r"tensor '[\w.]+' \(F32 \[\d+(, \d+)*\], \d+ bytes\) should lie at bytes \d+-\d+ of the data, "
            r"which has \d+ bytes",
        ),
        (-1, r"tensor '[\w.]+' .* should lie at bytes"),
    ],
)
def test_corrupt_safetensors_is_a_model_error_naming_file_and_problem(tmp_path, gpt2_folder, cut, problem):
    folder = _copy(gpt2_folder, tmp_path)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: int(cut * len(data)) if isinstance(cut, float) else cut])
    with pytest.raises(ModelError, match=rf"broken/model\.safetensors is not a valid checkpoint file: {problem}"):
        load_model(folder)


def test_bad_shard_index_is_a_model_error_naming_it(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint("gpt2", fmt="sharded", into=tmp_path)
    index = folder / "model.safetensors.index.json"
    for text, problem in (
        ("{not json", "is not valid JSON"),
        ('{"metadata": {}}', "has no 'weight_map'"),
        ('{"weight_map": {}}', "lists no shard files"),
        ("[1, 2]", "not a valid shard index"),
    ):
        index.write_text(text)
        with pytest.raises(ModelError, match=rf"model\.safetensors\.index\.json {problem}|index\.json .*{problem}"):
            load_model(folder)


@pytest.mark.parametrize("cut", [0, 100, 0.5])
def test_truncated_pytorch_bin_is_a_model_error_naming_it(tiny_checkpoint, tmp_path, cut):
    folder = tiny_checkpoint("bert", fmt="bin", into=tmp_path)
    weights = folder / "pytorch_model.bin"
    data = weights.read_bytes()
    weights.write_bytes(data[: int(cut * len(data)) if isinstance(cut, float) else cut])
    with pytest.raises(ModelError, match=r"pytorch_model\.bin is not a valid checkpoint file: torch cannot load it"):
        load_model(folder)


def test_shapes_that_disagree_with_the_config_name_tensor_found_and_expected(tiny_checkpoint, tmp_path, gpt2_folder):
    folder = _copy(gpt2_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"n_embd": 64}))
    with pytest.raises(
        ModelError,
        match=r"broken: the checkpoint does not match its GPT-2 config: tensors with "
        r"the wrong shape \['transformer\.wte\.weight: found \(\d+, 32\), "
        r"expected \(\d+, 64\)'.* and \d+ more",
    ):
        load_model(folder)
    llama = tiny_checkpoint("llama", into=tmp_path)
    config = json.loads((llama / "config.json").read_text())
    (llama / "config.json").write_text(json.dumps(config | {"intermediate_size": 48}))
    with pytest.raises(
        ModelError,
        match=r"llama-safetensors-0: .*'model\.layers\.0\.mlp\.gate_proj\.weight: "
        r"found \(64, 32\), expected \(48, 32\)'",
    ):
        load_model(llama)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weights_are_refused_naming_the_tensor(tmp_path, gpt2_folder, value):
    from safetensors.numpy import load_file, save_file

    folder = _copy(gpt2_folder, tmp_path)
    tensors = load_file(folder / "model.safetensors")
    tensors["transformer.h.1.mlp.c_fc.weight"][3, 5] = value
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ModelError,
        match=r"broken: tensors \['transformer\.h\.1\.mlp\.c_fc\.weight'\] hold NaN or "
        r"infinite values",
    ):
        load_model(folder)


def test_weights_that_overflow_in_float16_are_named_by_parameter(tmp_path, gpt2_folder):
    from safetensors.numpy import load_file, save_file

    folder = _copy(gpt2_folder, tmp_path)
    tensors = load_file(folder / "model.safetensors")
    tensors["transformer.ln_f.bias"][0] = 1e6  # finite in float32, infinite in float16
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    assert np.isfinite(np.asarray(load_model(folder).params["body"]["final_norm"]["bias"])).all()
    with pytest.raises(
        ModelError,
        match=r"parameters \[\"\['body'\]\['final_norm'\]\['bias'\]\"\] overflow to "
        r"infinity in float16; use model.precision=mixed",
    ):
        load_model(folder, precision="float16")


def test_a_config_field_the_port_does_not_read_is_refused_unless_it_is_the_default(tmp_path, gpt2_folder):
    """ConfigTaker: an option transformers knows, set to another value than its default, that the port never
    reads (GPT-2's reorder_and_upcast_attn) is refused by name; inert fields (dropout, ids) and the default
    value load."""
    folder = _copy(gpt2_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "reorder_and_upcast_attn": False, "resid_pdrop": 0.3}))
    load_model(folder)
    (folder / "config.json").write_text(json.dumps({**config, "reorder_and_upcast_attn": True, "n_ctx": 7}))
    with pytest.raises(
        ModelError, match=r"gpt2 port does not implement the config field\(s\) reorder_and_upcast_attn = True"
    ):
        load_model(folder)
