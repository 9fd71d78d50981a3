"""Language-model ports as Flax NNX modules run as pure JAX functions over their state, last layer exposed.

- :func:`load_model` (``loading``): a local folder (safetensors, sharded safetensors, PyTorch ``.bin``
  with torch installed), a ``.gguf`` file (``gguf``: dequantised, llama.cpp's Q/K permutation undone,
  tokenizer rebuilt from the file's metadata without torch), an embedded name (``smollm2-135m``,
  ``minilm-l6``) or a hub id + revision. The HF config is checked against what the port handles.
- Families, one folder each, each exporting a ``FAMILY`` (``family.Family``, the declared contract;
  ``family.family_for(model_type)`` finds one, an unknown ``model_type`` is refused with the list): 16 of
  them. Two builders make 14 from named sub-modules (``linear``, ``norms``, ``attention``, ``mlp``):
  :mod:`~jaxassoc.models.llama_like` (``llama`` for Llama and Mistral, ``qwen2``, ``phi3``, ``qwen3``,
  ``mixtral``, ``olmo``, ``gemma2``, ``gemma3``: a folder holds its ``config.py``) and
  :mod:`~jaxassoc.models.gpt_like` (``gpt2``, ``gpt_neo``, ``gpt_neox``, ``gptj``, ``opt``, ``mpt``:
  ``config.py`` and ``params.py``, the checkpoint's names); ``bert`` (BERT and RoBERTa) and ``t5`` have
  their own ``modeling.py``. Every family names the same sub-layer alike (``layers/attn/q/w``...).
  ``layers`` (parameters, norm functions, the layer scan), ``rope`` (rotary tables), ``masks`` (masks and
  position ids), ``attention`` (the one attention function and module) and ``causal_body`` (the causal body,
  its KV cache and cached step); layers are stacked and scanned (one block compiled). Adding a family:
  ``docs/models.md``.
- :class:`LanguageModel` (``base``): ``params = {"body": ..., "head": Head(W, b)}`` with the output head
  untied from the input embeddings; the body pytree is the NNX state of the family's body module.
  ``forward(body, ids, mask, all_layers=False) -> ForwardOutput`` gives the head input (after the final
  norm / MLM transform) and every layer's states on request; ``model.module`` is the whole model as an
  NNX module (``nnx.split(model.module, nnx.PathContains("head"), ...)`` isolates the head state).
- ``heads``: logits at chosen positions, the last real token of each row, next-token log-probs.
- :func:`run_batched` (``batching``): a jitted ``fn(params, ids, mask)`` over many sequences, sorted
  into length buckets (one compilation per bucket), optionally sharded over all devices;
  :func:`model_limits` gives the pad id, context and vocabulary size it checks inputs against;
  :func:`cast_params` for bf16 compute.
- ``packing``: many short sequences packed end to end into fixed rows (segment ids in the mask; the
  causal ports restart positions and attend within each sequence), one compiled shape.
- ``decoding``: greedy generation with a key/value cache (``LanguageModel.decoder`` of the causal ports;
  its ``forward_cached`` takes optional ``positions`` / ``allowed`` to lay out cache columns otherwise).
- ``continuations``: many continuations of one prompt scored over its keys/values in one pass, packed
  end to end after it with a block-causal mask (RPAM's multi-token attributes).
- ``mesh``: model-parallel sharding. Every weight carries logical axes as parameter metadata (``embed``,
  ``vocab``, ``heads``, ``kv_heads``, ``mlp``, ``layers``), mapped onto a ``("data", "fsdp", "tp")`` mesh
  (``make_mesh``); ``load_model(..., mesh=mesh)`` places each weight sharded as it is read, and
  ``run_batched`` / ``run_packed`` split batches over the mesh with ``mesh=model.mesh``. ``multihost``:
  several processes, each feeding its own rows of a batch and gathering every output
  (``multihost.Feeder`` serves every batch loop).
"""

from jaxassoc.models.base import ForwardOutput, Head, LanguageModel, Provenance, VocabInfo
from jaxassoc.models.batching import cast_params, model_limits, run_batched
from jaxassoc.models.loading import load_model

__all__ = [
    "ForwardOutput",
    "Head",
    "LanguageModel",
    "Provenance",
    "VocabInfo",
    "cast_params",
    "load_model",
    "model_limits",
    "run_batched",
]
