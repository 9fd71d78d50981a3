"""Tiny random HF checkpoints for the model-port tests (torch + transformers as the reference).

``save_tiny_checkpoint(tmp_path, family, seed)`` writes a folder that ``load_model`` can read: config.json,
weights (safetensors, sharded safetensors or a PyTorch ``.bin``) and a small tokenizer trained here on a
fixed corpus (byte-level BPE for GPT-2/RoBERTa/Llama, WordPiece for BERT), so nothing needs a network.
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

CORPUS = [
    "The doctor said that he would help the nurse with her work.",
    "She studies math and science; he studies art and music.",
    "These words are associated: flower and pleasant, insect and unpleasant.",
    'This sentence and this word are associated: "This is a test" and "good".',
    "People from every country enjoy food, music, family and friends.",
    "The engineer fixed the computer while the teacher wrote on the board.",
] * 4

# family -> (HF model class, HF config class, tokenizer kind)
FAMILIES = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", "bpe"),
    "bert": ("BertForMaskedLM", "BertConfig", "wordpiece"),
    "bert-encoder": ("BertModel", "BertConfig", "wordpiece"),
    "roberta": ("RobertaForMaskedLM", "RobertaConfig", "bpe"),
    "llama": ("LlamaForCausalLM", "LlamaConfig", "bpe"),
    "mistral": ("MistralForCausalLM", "MistralConfig", "bpe"),  # pass sliding_window=... to exercise it
}

TINY = dict(layers=2, hidden=32, heads=4, intermediate=64, positions=64)


def tiny_tokenizer(family: str) -> transformers.PreTrainedTokenizerFast:
    """A small tokenizer of the family's kind, trained deterministically on ``CORPUS``."""
    if FAMILIES[family][2] == "wordpiece":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(vocab_size=200, special_tokens=specials))
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
    specials = {
        "gpt2": ["<|endoftext|>"],
        "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
        "llama": ["<unk>", "<s>", "</s>"],
        "mistral": ["<unk>", "<s>", "</s>"],
    }[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=320, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    if family == "gpt2":
        return transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>"
        )
    if family == "roberta":
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


def tiny_config(family: str, vocab_size: int, **overrides) -> transformers.PretrainedConfig:
    """A tiny config of the family (2 layers, width 32, 4 heads); ``overrides`` are config fields."""
    s = TINY
    if family == "gpt2":
        fields = dict(
            n_layer=s["layers"],
            n_embd=s["hidden"],
            n_head=s["heads"],
            n_positions=s["positions"],
            bos_token_id=0,
            eos_token_id=0,
        )
    elif family in ("llama", "mistral"):
        fields = dict(
            num_hidden_layers=s["layers"],
            hidden_size=s["hidden"],
            num_attention_heads=s["heads"],
            num_key_value_heads=2,
            intermediate_size=s["intermediate"],
            max_position_embeddings=s["positions"],
            bos_token_id=1,
            eos_token_id=2,
        )
    else:
        fields = dict(
            num_hidden_layers=s["layers"],
            hidden_size=s["hidden"],
            num_attention_heads=s["heads"],
            intermediate_size=s["intermediate"],
            max_position_embeddings=s["positions"],
        )
        if family == "roberta":  # positions start after padding_idx = 1
            fields.update(max_position_embeddings=s["positions"] + 2, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    fields.update(vocab_size=vocab_size, **overrides)
    return getattr(transformers, FAMILIES[family][1])(**fields)


def tiny_model(family: str, seed: int = 0, vocab_size: int | None = None, **overrides) -> torch.nn.Module:
    """A tiny HF torch model with random weights drawn from ``seed``, in eval mode (no dropout)."""
    vocab_size = vocab_size or len(tiny_tokenizer(family))
    torch.manual_seed(seed)
    model = getattr(transformers, FAMILIES[family][0])(tiny_config(family, vocab_size, **overrides))
    with torch.no_grad():  # biases and norm weights start at 0/1: perturb them so the tests see them
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name.lower():
                p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def save_tiny_checkpoint(tmp_path: Path, family: str, seed: int = 0, *, fmt: str = "safetensors", **overrides) -> Path:
    """Write a tiny checkpoint folder (model + tokenizer) and return its path.

    ``family``: a key of ``FAMILIES``. ``fmt``: "safetensors" (one file), "sharded" (several safetensors
    files + index json) or "bin" (``pytorch_model.bin`` holding the full state dict, tied copies included).
    ``overrides`` are HF config fields.
    """
    folder = Path(tmp_path) / f"{family}-{fmt}-{seed}"
    tokenizer = tiny_tokenizer(family)
    model = tiny_model(family, seed, len(tokenizer), **overrides)
    if fmt == "bin":
        model.config.save_pretrained(folder)
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    elif fmt == "sharded":
        model.save_pretrained(folder, max_shard_size="20KB")
    else:
        model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def load_torch(folder: Path, family: str) -> torch.nn.Module:
    """The torch reference model of a tiny checkpoint folder, in eval mode."""
    return getattr(transformers, FAMILIES[family][0]).from_pretrained(folder).eval()
