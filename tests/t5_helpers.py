"""A tiny random T5 v1.1 checkpoint (torch + transformers as the reference) with a SentencePiece-style
tokenizer (``▁`` word marker, ``<pad>`` 0, ``</s>`` 1 appended to every encoding, as T5's)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import transformers
from models_helpers import CORPUS
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

TINY = dict(
    d_model=32,
    d_kv=8,
    d_ff=48,
    num_layers=2,
    num_decoder_layers=3,
    num_heads=4,
    relative_attention_num_buckets=8,
    relative_attention_max_distance=16,
    feed_forward_proj="gated-gelu",
    tie_word_embeddings=False,
    decoder_start_token_id=0,
    pad_token_id=0,
    eos_token_id=1,
)


def t5_tokenizer() -> transformers.PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=200, special_tokens=["<pad>", "</s>", "<unk>"]))
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


def save_t5(folder: Path, seed: int = 0, **overrides) -> Path:
    """Write a tiny T5 checkpoint folder and return it. v1.1 (``tie_word_embeddings=False``) gets its own
    random ``lm_head.weight``, as google/t5-v1.1-* store it (transformers 5 saves a tied head otherwise)."""
    folder = Path(folder)
    tokenizer = t5_tokenizer()
    torch.manual_seed(seed)
    config = transformers.T5Config(vocab_size=len(tokenizer), **{**TINY, **overrides})
    model = transformers.T5ForConditionalGeneration(config).eval()
    with torch.no_grad():  # norm weights start at 1: perturb them so the tests see them
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if not {**TINY, **overrides}["tie_word_embeddings"]:
        tensors = load_file(folder / "model.safetensors")
        rng = np.random.default_rng(seed)
        tensors["lm_head.weight"] = rng.normal(0, 1, tensors["shared.weight"].shape).astype(np.float32)
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
        hf = json.loads((folder / "config.json").read_text())
        hf["tie_word_embeddings"] = False
        hf.pop("scale_decoder_outputs", None)  # as the hub's v1.1 config.json
        (folder / "config.json").write_text(json.dumps(hf))
    return folder


def load_t5(folder: Path) -> torch.nn.Module:
    return transformers.T5ForConditionalGeneration.from_pretrained(folder).eval()
