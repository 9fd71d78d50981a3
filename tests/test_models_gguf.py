"""GGUF reading and the GGUF tokenizer, against transformers' own GGUF code and files written here.

References: transformers' GGUF tokenizer (``AutoTokenizer.from_pretrained(dir, gguf_file=...)``),
transformers' GGUF tensor conversion (``load_gguf_checkpoint``), llama.cpp's Q/K permutation and
pre-tokenizer regexes (re-implemented here with numpy and the ``regex`` module), and tiny torch models.
"""

from pathlib import Path

import family_specs
import gguf
import jax.numpy as jnp
import numpy as np
import pytest
import regex
import torch
import transformers
from family_specs.llama import GGUF

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Forward
from jaxassoc.models.gguf import _open, read_gguf, reverse_permute
from jaxassoc.models.gguf_tokenizer import bytes_to_unicode, tokenizer_from_metadata
from jaxassoc.models.heads import head_logits, last_positions
from jaxassoc.models.llama import FAMILY as llama
from jaxassoc.models.mesh import device_params
from jaxassoc.models.rope import RopeScaling
from jaxassoc.resources import smollm2_gguf

WIKITEXT = str(Path(__file__).resolve().parents[1] / "jaxassoc" / "data" / "files" / "wikitext2" / "test.txt")


def llama_cpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp ``convert_hf_to_gguf.py`` ``LlamaModel.permute`` (the forward direction)."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def test_reverse_permute_undoes_llama_cpp_and_matches_transformers():
    w = np.random.default_rng(0).normal(size=(3 * 8, 5)).astype(np.float32)
    np.testing.assert_array_equal(reverse_permute(llama_cpp_permute(w, 3), 3), w)
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    ref = LlamaTensorProcessor()._reverse_permute_weights(w, 3, 3)
    np.testing.assert_array_equal(reverse_permute(w, 3), ref)


# --- a tiny llama written to GGUF here ------------------------------------------------------------

BYTE_TOKENS = list(bytes_to_unicode().values())
TINY_TOKENS = ["<unk>", "<s>", "</s>", *BYTE_TOKENS, "Ġt", "he", "Ġthe"]
TINY_MERGES = ["Ġ t", "h e", "Ġt he"]


def _write_tiny_gguf(path, model, *, tied: bool, arch: str = "llama", pre: str = "gpt2", extra=lambda w: None):
    cfg = model.config
    writer = gguf.GGUFWriter(path, arch=arch)
    extra(writer)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_rope_dimension_count(cfg.head_dim)
    writer.add_vocab_size(cfg.vocab_size)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(TINY_TOKENS)
    writer.add_token_types([3, 3, 3] + [1] * (len(TINY_TOKENS) - 3))
    writer.add_token_merges(TINY_MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(True)
    names = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for name, t in model.state_dict().items():
        w = t.numpy().astype(np.float32)
        if name == "model.embed_tokens.weight":
            writer.add_tensor("token_embd.weight", w)
        elif name == "model.norm.weight":
            writer.add_tensor("output_norm.weight", w)
        elif name == "lm_head.weight":
            if not tied:
                writer.add_tensor("output.weight", w)
        else:
            layer, rest = name.removeprefix("model.layers.").split(".", 1)
            module = rest.removesuffix(".weight")
            if module == "self_attn.q_proj":
                w = llama_cpp_permute(w, cfg.num_attention_heads)
            elif module == "self_attn.k_proj":
                w = llama_cpp_permute(w, cfg.num_key_value_heads)
            writer.add_tensor(f"blk.{layer}.{names[module]}.weight", w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(the torch model of ``family_specs.llama.GGUF``, a folder holding it as ``untied.gguf``)."""
    assert GGUF.fields["vocab_size"] == len(TINY_TOKENS)
    model, _ = family_specs.build_torch(GGUF)
    folder = tmp_path_factory.mktemp("gguf")
    _write_tiny_gguf(folder / "untied.gguf", model, tied=False)
    return model, folder


def test_tiny_gguf_tensors_config_and_logits(tiny):
    model, folder = tiny
    hf_config, tensors, tokenizer = read_gguf(folder / "untied.gguf")
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    assert sorted(tensors) == sorted(state)
    for name, w in state.items():
        np.testing.assert_array_equal(tensors[name], w, err_msg=name)
    assert hf_config["num_key_value_heads"] == 2 and hf_config["rope_theta"] == 1000.0
    assert hf_config["tie_word_embeddings"] is False
    config = llama.config_from_hf(hf_config)
    params = device_params(llama.params_from_hf(tensors, config))
    enc = tokenizer(["the the t", "he"], padding=True, return_tensors="np")
    assert enc["input_ids"][0, 0] == 1  # add_bos_token = True in the file
    out = Forward(llama, config)(params["body"], enc["input_ids"], enc["attention_mask"])
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(enc["input_ids"]), attention_mask=torch.tensor(enc["attention_mask"]))
    real = enc["attention_mask"].astype(bool)
    assert np.abs(np.asarray(head_logits(params["head"], out.hidden)) - ref.logits.numpy())[real].max() <= 1e-4


def test_tied_gguf_gets_an_untied_head(tiny, tmp_path):
    model, _ = tiny
    _write_tiny_gguf(tmp_path / "tied.gguf", model, tied=True)
    hf_config, tensors, _ = read_gguf(tmp_path / "tied.gguf")
    assert hf_config["tie_word_embeddings"] is True and "lm_head.weight" not in tensors
    params = device_params(llama.params_from_hf(tensors, llama.config_from_hf(hf_config)))
    np.testing.assert_array_equal(np.asarray(params["head"].W), tensors["model.embed_tokens.weight"])
    assert params["head"].W.unsafe_buffer_pointer() != params["body"]["embed"].unsafe_buffer_pointer()


def test_gguf_file_parser_equals_gguf_reader(tiny, tmp_path):
    """Our parser against gguf's own GGUFReader: every metadata value (type included) and every tensor's
    name, type, shape and bytes, on the tiny file, a tied one and SmolLM2's Q4_1/Q8_0 file."""
    model, folder = tiny
    _write_tiny_gguf(tmp_path / "tied.gguf", model, tied=True)
    for path in (folder / "untied.gguf", tmp_path / "tied.gguf", smollm2_gguf()):
        theirs, ours = gguf.GGUFReader(path), _open(path)
        expected = {k: f.contents() for k, f in theirs.fields.items() if not k.startswith("GGUF.")}
        assert ours.metadata.keys() == expected.keys()
        for key, value in expected.items():
            assert ours.metadata[key] == value and type(ours.metadata[key]) is type(value), key
        assert [(t.name, t.tensor_type) for t in ours.tensors] == [(t.name, t.tensor_type) for t in theirs.tensors]
        for a, b in zip(ours.tensors, theirs.tensors):
            assert a.data.dtype == b.data.dtype and a.data.shape == b.data.shape and np.array_equal(a.data, b.data)


def test_unreadable_files_raise_model_error_naming_them(tiny, tmp_path):
    model, folder = tiny
    with pytest.raises(ModelError, match="missing.gguf"):
        read_gguf(tmp_path / "missing.gguf")
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ModelError, match="garbage.gguf"):
        read_gguf(garbage)
    data = (folder / "untied.gguf").read_bytes()
    for cut in (20, len(data) // 3, len(data) - 100):
        truncated = tmp_path / f"truncated{cut}.gguf"
        truncated.write_bytes(data[:cut])
        with pytest.raises(ModelError, match=f"truncated{cut}.gguf"):
            read_gguf(truncated)
    _write_tiny_gguf(tmp_path / "other.gguf", model, tied=False, arch="qwen2")
    with pytest.raises(ModelError, match=r"other\.gguf.*'qwen2'"):
        read_gguf(tmp_path / "other.gguf")
    _write_tiny_gguf(tmp_path / "pre.gguf", model, tied=False, pre="no-such-pre")
    with pytest.raises(ModelError, match="no-such-pre"):
        read_gguf(tmp_path / "pre.gguf")


def test_unsupported_gguf_options_are_refused(tiny, tmp_path):
    """Rope scaling and experts in the metadata reach config_from_hf, which refuses what it does not implement
    by name (yarn, experts) and reads linear scaling with its factor."""
    model, _ = tiny
    cases = {
        "yarn": lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.YARN), w.add_rope_scaling_factor(2.0)),
        "num_local_experts": lambda w: w.add_expert_count(8),
    }
    for words, extra in cases.items():
        path = tmp_path / f"{words}.gguf"
        _write_tiny_gguf(path, model, tied=False, extra=extra)
        hf_config, _, _ = read_gguf(path)
        with pytest.raises(ModelError, match=words):
            llama.config_from_hf(hf_config)
    path = tmp_path / "linear.gguf"
    _write_tiny_gguf(
        path,
        model,
        tied=False,
        extra=lambda w: (w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR), w.add_rope_scaling_factor(2.0)),
    )
    assert llama.config_from_hf(read_gguf(path)[0]).rope_scaling == RopeScaling("linear", 2.0)


# --- the SmolLM2 GGUF tokenizer against transformers' -----------------------------------------------

GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

CRAFTED = [
    "",
    " ",
    "  ",
    "   leading spaces",
    "trailing spaces   ",
    "\ttab\tand\nnewline\n\n",
    "Hello world",
    "\"double\" and 'single' quotes",
    "“curly” ‘quotes’ «guillemets»",
    "it's, I'LL, we've, they'd",
    "naïve café résumé Ångström",
    "Straße groß",
    "日本語のテキスト",
    "中文字符",
    "한국어",
    "العربية",
    "Ελληνικά",
    "emoji 😀🎉👩‍👩‍👧 ok",
    "combining e\u0301 and a\u0308",
    "zero\u200bwidth",
    "math ∑ ∫ √ ≤ ≥",
    "The year 2024 and 3.14159",
    "a  1",
    "x   42 y",
    "$100,000.00",
    "1st 2nd 3rd",
    "phone: +1 (555) 010-9999",
    "code: def f(x): return x**2  # comment",
    "URL https://example.com/a?b=c&d=e",
    "<unk> tokens <unk>",
    "@-@ hyphen @,@ comma @.@ dot",
    "MiXeD CaSe WORDS",
    "tabs\t\t\tmany",
    " ' apostrophe ' alone",
    "The nurse said that she",
    "The engineer said that he",
    "ümlaut Über",
    "ĠG with dot",
    "�replacement",
]


def _wikitext_lines(n=240):
    lines = [line.rstrip("\n") for line in open(WIKITEXT, encoding="utf-8")]
    return [line for line in lines if line.strip()][:n]


@pytest.fixture(scope="module")
def smollm2_tokenizers():
    path = smollm2_gguf()
    metadata = _open(path).metadata
    ours = tokenizer_from_metadata(metadata)
    theirs = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    return ours, theirs, metadata


def _llama_cpp_reference(theirs, text):
    """llama.cpp's 'smollm' pre-tokenisation (isolate each \\p{N}, then the GPT-2 split), BPE by transformers."""
    ids = []
    for piece in regex.split(r"(\p{N})", text):
        for chunk in regex.findall(GPT2_SPLIT, piece):
            ids += theirs(chunk, add_special_tokens=False)["input_ids"]
    return ids


def test_smollm2_tokenizer_matches_transformers_on_varied_strings(smollm2_tokenizers):
    ours, theirs, _ = smollm2_tokenizers
    texts = _wikitext_lines() + CRAFTED
    assert len(texts) > 250
    differing = []
    for text in texts:
        ids = ours(text)["input_ids"]
        assert ids == _llama_cpp_reference(theirs, text), text
        if ids != theirs(text)["input_ids"]:
            differing.append(text)
        assert ours.decode(ids) == theirs.decode(ids) == text, text
    # transformers skips the digit split of 'smollm'; that only matters for a blank run before a digit.
    assert all(regex.search(r"\s{2,}\p{N}", t) for t in differing), differing
    assert set(differing) >= {"a  1", "x   42 y"}


def test_digit_after_blank_run_follows_llama_cpp(smollm2_tokenizers):
    ours, _, _ = smollm2_tokenizers
    assert ours.convert_ids_to_tokens(ours("a  1")["input_ids"]) == ["a", "ĠĠ", "1"]
    assert ours.convert_ids_to_tokens(ours(" 2024")["input_ids"]) == ["Ġ", "2", "0", "2", "4"]


def test_smollm2_special_tokens_and_template(smollm2_tokenizers):
    ours, theirs, metadata = smollm2_tokenizers
    for name in ("bos_token", "eos_token", "unk_token", "pad_token"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert (ours.bos_token, ours.eos_token) == ("<|im_start|>", "<|im_end|>")
    assert metadata["tokenizer.ggml.add_bos_token"] is False
    assert ours("hello")["input_ids"] == theirs("hello")["input_ids"] == [28120]  # no BOS by default
    chat = "<|im_start|>user\nWho are you?<|im_end|>\n<|im_start|>assistant\n<repo_name>x"
    assert ours(chat)["input_ids"] == theirs(chat)["input_ids"]
    assert ours(chat)["input_ids"][0] == 1
    ids = ours(chat)["input_ids"]
    assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)
    messages = [{"role": "user", "content": "Rate the word 'pleasant' from 1 to 5."}]
    assert ours.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == (
        theirs.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    )
    assert len(ours) == len(theirs) == 49152


def test_llama_bpe_pre_tokenizer_matches_transformers(smollm2_tokenizers, tmp_path):
    """A Llama-3 style file (pre = 'llama-bpe', add_bos_token) built from SmolLM2's vocabulary."""
    _, _, metadata = smollm2_tokenizers
    path = tmp_path / "llama3ish.gguf"
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(metadata["tokenizer.ggml.tokens"])
    writer.add_token_types(metadata["tokenizer.ggml.token_type"])
    writer.add_token_merges(metadata["tokenizer.ggml.merges"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    ours = tokenizer_from_metadata(_open(path).metadata)
    theirs = transformers.AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    for text in _wikitext_lines(60) + CRAFTED:
        assert ours(text)["input_ids"] == theirs(text)["input_ids"], text
    assert ours("hi")["input_ids"][0] == 1


# --- the real checkpoint ----------------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_logits_match_transformers_gguf_loader():
    """Same GGUF through transformers' converter (dequantised to fp32) and through ours: logits within 1e-3."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    path = smollm2_gguf()
    hf_config, tensors, tokenizer = read_gguf(path)
    meta = load_gguf_checkpoint(str(path), return_tensors=False)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**meta["config"])).eval()
    ref_tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    assert sorted(ref_tensors) == sorted(tensors)
    for name, w in ref_tensors.items():
        np.testing.assert_array_equal(tensors[name], w.numpy(), err_msg=name)
    model.load_state_dict(ref_tensors, strict=False)
    model.tie_weights()

    config = llama.config_from_hf(hf_config)
    params = device_params(llama.params_from_hf(tensors, config))
    prompts = ["The capital of France is", " The nurse said that", "Robert is an English film , television and"]
    for side in ("right", "left"):
        tokenizer.padding_side = side
        enc = tokenizer(prompts, padding=True, return_tensors="np")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        positions = np.maximum(np.cumsum(mask, 1) - 1, 0)
        with torch.no_grad():
            ref = model(
                input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask), position_ids=torch.tensor(positions)
            ).logits.numpy()
        hidden = Forward(llama, config)(params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
        ours = np.asarray(head_logits(params["head"], hidden))
        real = mask.astype(bool)
        assert np.abs(ours - ref)[real].max() <= 1e-3, side
    last = int(last_positions(jnp.asarray(mask))[0])
    assert tokenizer.decode(int(ours[0, last].argmax())) == " Paris"


def test_load_model_reads_a_gguf_file(tiny):
    """The dispatcher path: load_model(file.gguf) -> a llama LanguageModel whose logits match torch."""
    from jaxassoc.models.loading import load_model

    model, folder = tiny
    lm = load_model(str(folder / "untied.gguf"))
    assert (lm.family, lm.objective, lm.provenance.file_format) == ("llama", "causal", "gguf")
    assert lm.vocab.add_bos and lm.vocab.bos_id == 1 and lm.vocab.word_initial_marker == "Ġ"
    enc = lm.tokenizer(["the the", "he t the"], padding=True, return_tensors="np")
    hidden = lm.forward(lm.params["body"], enc["input_ids"], enc["attention_mask"]).hidden
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(enc["input_ids"]), attention_mask=torch.tensor(enc["attention_mask"]))
    real = enc["attention_mask"].astype(bool)
    assert np.abs(np.asarray(head_logits(lm.head, hidden)) - ref.logits.numpy())[real].max() <= 1e-4


def test_empty_gguf_metadata_without_vocabulary_and_nan_tensors_are_named(tiny, tmp_path):
    import copy

    from jaxassoc.models.loading import load_model

    model, _ = tiny
    (tmp_path / "empty.gguf").write_bytes(b"")
    with pytest.raises(ModelError, match=r"cannot read GGUF file .*empty\.gguf"):
        read_gguf(tmp_path / "empty.gguf")
    with pytest.raises(ModelError, match=r"x\.gguf: the metadata holds no vocabulary \(tokenizer\.ggml\.tokens\)"):
        tokenizer_from_metadata({"tokenizer.ggml.model": "gpt2"}, source="x.gguf")
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.model.layers[1].mlp.down_proj.weight[0, 0] = float("nan")
    _write_tiny_gguf(tmp_path / "nan.gguf", broken, tied=False)
    with pytest.raises(ModelError, match=r"nan\.gguf: tensors \['model\.layers\.1\.mlp\.down_proj\.weight'\] hold NaN"):
        load_model(tmp_path / "nan.gguf")


@pytest.fixture(scope="module")
def sentencepiece_gguf(tmp_path_factory):
    """A Llama-2 style file: SentencePiece BPE trained here on WikiText-2, scores instead of merges."""
    from tokenizers import SentencePieceBPETokenizer

    trained = SentencePieceBPETokenizer()
    trained.train_from_iterator(_wikitext_lines(2000), vocab_size=1200, show_progress=False)
    pieces = sorted(trained.get_vocab().items(), key=lambda kv: kv[1])
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *(p for p, _ in pieces)]
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    folder = tmp_path_factory.mktemp("spm")
    writer = gguf.GGUFWriter(folder / "spm.gguf", arch="llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return folder / "spm.gguf"


def test_sentencepiece_tokenizer_matches_transformers(sentencepiece_gguf):
    path = sentencepiece_gguf
    ours = tokenizer_from_metadata(_open(path).metadata)
    theirs = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    assert ours.bos_token == theirs.bos_token == "<s>"
    for text in _wikitext_lines(120) + CRAFTED + ["<s>inside</s> specials", "Ünïcödé ✓ 😀 byte fallback"]:
        ids = ours(text)["input_ids"]
        assert ids == theirs(text)["input_ids"], text
        assert ids[0] == 1  # llama.cpp and transformers add BOS to a 'llama' vocabulary by default
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True), text
    assert "<0xF0>" in ours.convert_ids_to_tokens(ours("😀")["input_ids"])  # byte fallback
