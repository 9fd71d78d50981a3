"""Reading a llama.cpp GGUF checkpoint into Hugging Face names, config and tokenizer, without torch.

A GGUF file (parsed by :mod:`jaxassoc.models.gguf_file`) holds metadata (``llama.*`` hyper-parameters,
``tokenizer.ggml.*``) and tensors named the llama.cpp way (``token_embd``, ``blk.N.attn_q``, ...), possibly
quantised (Q4_1, Q8_0, ...). We dequantise every tensor to float32 with ``gguf.quants.dequantize``, rename
it to the Hugging Face name and undo the row permutation llama.cpp's converter applies to the query and key
projections (``convert_hf_to_gguf.py``, ``LlamaModel.permute``), exactly as transformers'
``modeling_gguf_pytorch_utils.LlamaTensorProcessor._reverse_permute_weights`` does.

Only ``general.architecture == "llama"`` is supported: llama.cpp stores Llama, Mistral (dense) and
SmolLM checkpoints under that name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from jaxassoc.errors import ModelError
from jaxassoc.models.gguf_file import GgufFile, read_gguf_file

SUPPORTED_ARCHITECTURES = ("llama",)

# llama.cpp tensor name (without the block prefix) -> Hugging Face module name.
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLOCK_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


def read_gguf(path: str | Path, *, progress: bool = False) -> tuple[dict, dict[str, np.ndarray], Any]:
    """``(hf_config, tensors, tokenizer)`` of a llama-architecture GGUF file.

    ``hf_config`` uses transformers' ``LlamaConfig`` keys (so ``llama.config_from_hf`` reads it),
    ``tensors`` maps Hugging Face names to float32 arrays (dequantised, Q/K un-permuted) and
    ``tokenizer`` is a ``PreTrainedTokenizerFast`` built from the file's metadata.
    Raises ModelError naming the file when it is missing, corrupt, truncated or of another architecture.
    ``progress``: a progress bar over the tensors being dequantised.
    """
    from jaxassoc.models.gguf_tokenizer import tokenizer_from_metadata

    path = Path(path)
    reader = _open(path)
    metadata = reader.metadata
    config = config_from_metadata(metadata, tensor_names=[t.name for t in reader.tensors], path=path)
    tensors = _read_tensors(reader, config, path, progress)
    tokenizer = tokenizer_from_metadata(metadata, source=str(path))
    return config, tensors, tokenizer


def _open(path: Path) -> GgufFile:
    if not path.is_file():
        raise ModelError(f"GGUF file {path} does not exist; pass the path of a .gguf checkpoint")
    try:
        return read_gguf_file(path)
    except Exception as e:  # ValueError, struct.error, UnicodeDecodeError, ... on bad bytes
        raise ModelError(
            f"cannot read GGUF file {path}: it is corrupt, truncated or not a GGUF file "
            f"({type(e).__name__}: {e}); download it again"
        ) from None


def config_from_metadata(metadata: dict[str, Any], *, tensor_names: list[str], path: Path | str) -> dict:
    """A transformers-style config dict from ``llama.*`` metadata.

    Options the llama port does not implement (rope scaling, experts) are copied across so that
    ``llama.config_from_hf`` refuses them with a clear message instead of silently ignoring them.
    """
    arch = metadata.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ModelError(
            f"GGUF file {path}: architecture {arch!r} is not supported; jaxassoc reads GGUF files of "
            f"architecture {list(SUPPORTED_ARCHITECTURES)} (Llama, Mistral, SmolLM)"
        )

    def key(name, default=None, required=True):
        full = f"{arch}.{name}"
        if full not in metadata:
            if required:
                raise ModelError(f"GGUF file {path}: metadata key {full!r} is missing; the file is incomplete")
            return default
        return metadata[full]

    hidden = int(key("embedding_length"))
    heads = int(key("attention.head_count"))
    n_tokens = len(metadata.get("tokenizer.ggml.tokens", ()))
    config = {
        "model_type": "llama",
        "vocab_size": int(key("vocab_size", n_tokens, required=False)),
        "hidden_size": hidden,
        "intermediate_size": int(key("feed_forward_length")),
        "num_hidden_layers": int(key("block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(key("attention.head_count_kv", heads, required=False)),
        "head_dim": int(key("rope.dimension_count", hidden // heads, required=False)),
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(key("rope.freq_base", 10000.0, required=False)),
        "max_position_embeddings": int(key("context_length")),
        "hidden_act": "silu",
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "bos_token_id": metadata.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": metadata.get("tokenizer.ggml.eos_token_id"),
        "pad_token_id": metadata.get("tokenizer.ggml.padding_token_id"),
    }
    scaling = key("rope.scaling.type", None, required=False)
    if scaling not in (None, "none"):
        config["rope_scaling"] = {"rope_type": scaling, "factor": key("rope.scaling.factor", None, required=False)}
    experts = key("expert_count", 0, required=False)
    if experts:
        config["num_local_experts"] = int(experts)
    return config


def _hf_name(gguf_name: str) -> str | None:
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    match = _BLOCK.match(gguf_name)
    if match and match.group(2) in _BLOCK_NAMES:
        return f"model.layers.{match.group(1)}.{_BLOCK_NAMES[match.group(2)]}"
    return None


def reverse_permute(weight: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's Q/K row permutation: per head, rows ``(2, d/2)`` interleaved back to ``(d/2, 2)``."""
    dim = weight.shape[0] // n_head // 2
    return weight.reshape(n_head, dim, 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _read_tensors(reader, config: dict, path: Path, progress: bool) -> dict[str, np.ndarray]:
    from gguf.quants import dequantize

    unknown = [t.name for t in reader.tensors if _hf_name(t.name) is None]
    if unknown:
        raise ModelError(
            f"GGUF file {path}: tensors {unknown[:8]}{' ...' if len(unknown) > 8 else ''} are not part of "
            "the dense Llama architecture jaxassoc implements (e.g. rope frequency factors or experts)"
        )
    tensors = {}
    todo = reader.tensors
    if progress:
        from tqdm.auto import tqdm

        todo = tqdm(todo, desc=f"dequantising {path.name}", unit="tensor", leave=False)
    for tensor in todo:
        try:
            weight = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        except Exception as e:
            raise ModelError(
                f"GGUF file {path}: tensor {tensor.name!r} ({tensor.tensor_type.name}) cannot be "
                f"dequantised ({type(e).__name__}: {e})"
            ) from None
        name = _hf_name(tensor.name)
        if name.endswith("q_proj.weight"):
            weight = reverse_permute(weight, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            weight = reverse_permute(weight, config["num_key_value_heads"])
        tensors[name] = weight
    return tensors
