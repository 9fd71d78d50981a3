"""Every tiny checkpoint the tests use, as data: a :class:`Spec` is a random transformers model (its class,
config fields, seed and which parameters get noise) with a small tokenizer trained here, so nothing needs a
network. The one factory that writes them (cached on disk, shared by the whole session) is the
``tiny_checkpoint`` fixture in ``tests/conftest.py``.

- ``tests/family_specs/<family>.py`` declares the causal families' conformance specs (``SPECS``, checked
  against transformers by ``tests/test_models_conformance.py``), the HF config fields the family refuses
  (``REFUSED``: ``[(base config, [(fields, words in the error), ...]), ...]``, checked by
  ``tests/test_models_refusals.py``; :func:`with_fields` says how ``fields`` change the base), and the specs
  of the family's own test file as named constants (they stay out of ``SPECS``, so out of the conformance
  suite), e.g. ``family_specs.llama.PORT_LLAMA`` or ``family_specs.t5.V11``.
- :func:`tiny` gives the general-purpose tiny model of a family (GPT-2, BERT, RoBERTa, Llama, Mistral)
  that the app, readout and metric tests load, with config overrides and a seed.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path
from typing import Any

CORPUS = [
    "The doctor said that he would help the nurse with her work.",
    "She studies math and science; he studies art and music.",
    "These words are associated: flower and pleasant, insect and unpleasant.",
    'This sentence and this word are associated: "This is a test" and "good".',
    "People from every country enjoy food, music, family and friends.",
    "The engineer fixed the computer while the teacher wrote on the board.",
] * 4
"""The text the tiny tokenizers are trained on."""

BOS_EOS = {"bos_token_id": 1, "eos_token_id": 2}  # the "llama" tokenizer's <s> and </s>


@dataclasses.dataclass(frozen=True)
class Spec:
    """A tiny random checkpoint, as transformers builds it (``vocab_size`` comes from the tokenizer)."""

    name: str
    """The test id, e.g. ``"gpt_neox-parallel"``."""
    model_class: str
    """transformers' model class, e.g. ``"GPTNeoXForCausalLM"``."""
    config_class: str
    fields: dict[str, Any]
    """Config fields (``bos/eos_token_id`` default to 1/2 for the "llama" tokenizer)."""
    atol: float = 1e-4
    perturb: tuple[str, ...] = ("bias", "norm", "ln", "layernorm")
    """Parameters whose name contains one of these get noise added (they start at 0/1 in a fresh model)."""
    seed: int = 0
    tokenizer: str = "llama"
    """The tokenizer kind (:data:`TOKENIZERS`)."""

    def with_fields(self, seed: int | None = None, **fields) -> "Spec":
        """The same spec with other config fields and/or seed (the name stays: the cache key is the content)."""
        return dataclasses.replace(self, fields={**self.fields, **fields}, seed=self.seed if seed is None else seed)


# tokenizer kind -> (model, special tokens)
TOKENIZERS = {
    "gpt2": ("bpe", ["<|endoftext|>"]),
    "roberta": ("bpe", ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]),
    "llama": ("bpe", ["<unk>", "<s>", "</s>"]),
    "bert": ("wordpiece", ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]),
    "t5": ("metaspace", ["<pad>", "</s>", "<unk>"]),  # SentencePiece-style: "▁" word marker, </s> appended
}

_TINY = dict(
    num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64
)
_TINY_PERTURB = ("bias", "norm")  # the general-purpose models: biases and norm weights start at 0/1

TINY: dict[str, Spec] = {
    "gpt2": Spec(
        "tiny-gpt2",
        "GPT2LMHeadModel",
        "GPT2Config",
        dict(n_layer=2, n_embd=32, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0),
        perturb=_TINY_PERTURB,
        tokenizer="gpt2",
    ),
    "bert": Spec("tiny-bert", "BertForMaskedLM", "BertConfig", dict(_TINY), perturb=_TINY_PERTURB, tokenizer="bert"),
    "bert-encoder": Spec(
        "tiny-bert-encoder", "BertModel", "BertConfig", dict(_TINY), perturb=_TINY_PERTURB, tokenizer="bert"
    ),
    "roberta": Spec(
        "tiny-roberta",
        "RobertaForMaskedLM",
        "RobertaConfig",  # positions start after padding_idx 1
        dict(_TINY, max_position_embeddings=66, pad_token_id=1, bos_token_id=0, eos_token_id=2),
        perturb=_TINY_PERTURB,
        tokenizer="roberta",
    ),
    "llama": Spec(
        "tiny-llama",
        "LlamaForCausalLM",
        "LlamaConfig",
        dict(_TINY, num_key_value_heads=2, **BOS_EOS),
        perturb=_TINY_PERTURB,
    ),
    "mistral": Spec(
        "tiny-mistral",
        "MistralForCausalLM",
        "MistralConfig",  # pass sliding_window=... to use it
        dict(_TINY, num_key_value_heads=2, **BOS_EOS),
        perturb=_TINY_PERTURB,
    ),
}
"""The general-purpose tiny model of each family (2 layers, width 32, 4 heads)."""


def tiny(family: str, seed: int = 0, **fields) -> Spec:
    """The tiny ``family`` model (a key of :data:`TINY`) with random weights from ``seed`` and config
    ``fields`` overridden."""
    return TINY[family].with_fields(seed, **fields)


def wordpiece_vocab(corpus: list[str], specials: list[str], vocab_size: int) -> dict[str, int]:
    """An uncased WordPiece vocabulary of exactly ``vocab_size`` entries built without a trainer, so the same
    in every process: the ``specials``, the corpus's characters (sorted), the same characters as word
    continuations (``##c``, sorted), then the corpus's words by count (most first) and spelling, then, if
    room is left, ``[unused0]``, ``[unused1]``, ... as BERT's own vocabulary has (a size that the mesh
    tests' axes divide).

    ``tokenizers``' WordPieceTrainer numbers the ``##`` alphabet in Rust hash-map order and breaks ties
    between equally frequent merges by those numbers, so its vocabulary changed from process to process
    (issue 38). A word outside the vocabulary splits into its characters, as a rare word does in BERT's."""
    from collections import Counter

    from tokenizers import normalizers, pre_tokenizers

    normalizer, split = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    words = Counter(w for text in corpus for w, _ in split.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for w in words for c in w})
    entries = [*specials, *chars, *(f"##{c}" for c in chars)]
    entries += [w for w, _ in sorted(words.items(), key=lambda wc: (-wc[1], wc[0])) if len(w) > 1]
    if vocab_size < len(specials) + 2 * len(chars):
        raise ValueError(f"vocab_size={vocab_size} cannot hold the specials and the corpus's characters")
    entries += [f"[unused{i}]" for i in range(vocab_size - len(entries))]
    return {token: i for i, token in enumerate(entries[:vocab_size])}


def tiny_tokenizer(kind: str, corpus: list[str] = CORPUS, vocab_size: int | None = None):
    """A small tokenizer of a :data:`TOKENIZERS` kind, built on ``corpus`` identically in every process (a
    vocabulary of at most ``vocab_size``; default 200 for WordPiece and T5's, 320 for byte-level BPE): the
    WordPiece vocabulary by :func:`wordpiece_vocab`, the BPE ones by ``tokenizers``' BpeTrainer, whose alphabet
    is sorted and whose merges break ties by those ids (``tests/test_tiny_tokenizers.py`` builds each kind
    in two interpreters with other hash seeds and compares)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    model, specials = TOKENIZERS[kind]
    if model == "wordpiece":
        vocab = wordpiece_vocab(corpus, specials, vocab_size or 200)
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[(s, tok.token_to_id(s)) for s in ("[CLS]", "[SEP]")]
        )
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok,
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    if model == "metaspace":  # T5's: <pad> 0, </s> 1 appended to every encoding, <unk> 2
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size or 200, special_tokens=specials))
        tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=vocab_size or 320, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    if kind == "gpt2":
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>"
        )
    if kind == "roberta":
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
        )
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<s>",
            pad_token="<pad>",
            eos_token="</s>",
            unk_token="<unk>",
            mask_token="<mask>",
            cls_token="<s>",
            sep_token="</s>",
        )
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def build_torch(spec: Spec):
    """The spec's torch model (eval mode, random weights from its seed) and its tokenizer (``vocab_size``
    is the tokenizer's unless the spec's fields set it). A T5 spec with ``tie_word_embeddings=False``: the
    head is still tied here (transformers 5 ties it); :func:`write` gives the checkpoint its own head, so
    take the reference from the folder (:func:`load_torch`)."""
    import torch
    import transformers

    tokenizer = tiny_tokenizer(spec.tokenizer)
    fields = {**(BOS_EOS if spec.tokenizer == "llama" else {}), "vocab_size": len(tokenizer), **spec.fields}
    config = getattr(transformers, spec.config_class)(**fields)
    torch.manual_seed(spec.seed)
    model = getattr(transformers, spec.model_class)(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(part in name.lower() for part in spec.perturb):
                p.add_(0.1 * torch.randn_like(p))
    return model.eval(), tokenizer


def write(spec: Spec, folder: Path, fmt: str = "safetensors") -> Path:
    """Write the spec's checkpoint (model + tokenizer) into ``folder``: ``fmt`` "safetensors" (one file),
    "sharded" (several safetensors files + index json) or "bin" (``pytorch_model.bin`` holding the full
    state dict, tied copies included)."""
    import torch

    model, tokenizer = build_torch(spec)
    folder = Path(folder)
    untie = spec.fields.get("tie_word_embeddings") is False and model.config.tie_word_embeddings
    if untie and fmt != "safetensors":
        raise ValueError(f"{spec.name}: a head transformers ties against the config is untied in safetensors only")
    if fmt == "bin":
        model.config.save_pretrained(folder)
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    elif fmt == "sharded":
        model.save_pretrained(folder, max_shard_size="20KB")
    elif fmt == "safetensors":
        model.save_pretrained(folder)
    else:
        raise ValueError(f"unknown checkpoint format {fmt!r}")
    if untie:
        _untie_head(folder, model, spec.seed)
    tokenizer.save_pretrained(folder)
    return folder


def _untie_head(folder: Path, model, seed: int) -> None:
    """Give a checkpoint that transformers 5 saved with a tied head (T5 v1.1, whatever the config says) its
    own random ``lm_head.weight``, as google/t5-v1.1-* store it, and ``tie_word_embeddings: false`` in its
    config.json, without the ``scale_decoder_outputs`` transformers derives (as the hub's v1.1 config.json)."""
    import json

    import numpy as np
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    shape = tuple(model.get_input_embeddings().weight.shape)
    tensors["lm_head.weight"] = np.random.default_rng(seed).normal(0, 1, shape).astype(np.float32)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    hf = json.loads((folder / "config.json").read_text())
    hf["tie_word_embeddings"] = False
    hf.pop("scale_decoder_outputs", None)
    (folder / "config.json").write_text(json.dumps(hf))


def load_torch(spec: Spec | str, folder: Path):
    """The torch reference model of a checkpoint folder written from ``spec`` (or the :data:`TINY` model of a
    family name), in eval mode."""
    import transformers

    model_class = (TINY[spec] if isinstance(spec, str) else spec).model_class
    return getattr(transformers, model_class).from_pretrained(folder).eval()


def _family_modules() -> dict[str, Any]:
    return {m.name: importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)}


def specs_by_family() -> dict[str, list[Spec]]:
    """Family module name -> its conformance ``SPECS``."""
    return {name: list(module.SPECS) for name, module in _family_modules().items() if hasattr(module, "SPECS")}


def all_specs() -> list[Spec]:
    """Every family's conformance ``SPECS``, sorted by name (unique names)."""
    specs = [s for family in specs_by_family().values() for s in family]
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), f"duplicate spec names: {names}"
    return sorted(specs, key=lambda s: s.name)


class _Null:
    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()
"""A field value in ``REFUSED``: the field is there with the value None (JSON ``null``); None drops it."""


def with_fields(base: dict, fields: dict) -> dict:
    """``base`` (a HF config.json dict, not changed) with ``fields`` set: a None value drops the field,
    :data:`NULL` sets it to None, a dict value replaces the base's whole and loses its own None entries (a key
    dropped one level down), any other value replaces the base's."""
    out = dict(base)
    for key, value in fields.items():
        if value is None:
            out.pop(key, None)
        elif value is NULL:
            out[key] = None
        elif isinstance(value, dict):
            out[key] = {k: v for k, v in value.items() if v is not None}
        else:
            out[key] = value
    return out


def refusals() -> list[tuple[str, dict, dict, str]]:
    """``(family, base HF config, fields, words)`` for every refused config field of every family
    (``REFUSED`` in the family's module, named by the module): ``with_fields(base, fields)`` must raise a
    ModelError matching ``words`` (a regular expression) from the family's ``config_from_hf``."""
    out = []
    for name, module in sorted(_family_modules().items()):
        for base, cases in getattr(module, "REFUSED", ()):
            out += [(name, base, fields, words) for fields, words in cases]
    return out
