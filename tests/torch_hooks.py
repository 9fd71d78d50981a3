"""PyTorch references for head and neuron interventions: transformers causal LMs run with forward pre-hooks.

After Vig et al. 2020 (causal mediation analysis), a head's output is its slice of the input to the
attention output projection (columns ``h*head_dim:(h+1)*head_dim``) and an MLP neuron is a column of the
input to the MLP's down projection. The hooks read or replace those inputs; GPT-2 and Llama models are
told apart by ``config.model_type`` (:data:`MODULES`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch

MODULES: dict[str, tuple[str, str, str]] = {
    "gpt2": ("transformer.h", "attn.c_proj", "mlp.c_proj"),
    "llama": ("model.layers", "self_attn.o_proj", "mlp.down_proj"),
}
"""``model_type`` -> (the blocks, the attention output projection and the MLP down projection in a block)."""


def _module(model, layer: int, part: int) -> torch.nn.Module:
    blocks, *projections = MODULES[model.config.model_type]
    return model.get_submodule(f"{blocks}.{layer}.{projections[part]}")


@contextlib.contextmanager
def _pre_hook(module: torch.nn.Module, hook: Callable) -> Iterator[None]:
    handle = module.register_forward_pre_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def _input_of(model, ids, mask, module: torch.nn.Module) -> torch.Tensor:
    captured = []
    with torch.inference_mode(), _pre_hook(module, lambda _, args: captured.append(args[0].clone())):
        model(input_ids=ids, attention_mask=mask)
    (value,) = captured
    return value


def head_output(model, ids, mask, layer: int) -> torch.Tensor:
    """``(B, T, H, head_dim)``: every head's output in ``layer``, the input of its attention output projection."""
    value = _input_of(model, ids, mask, _module(model, layer, 0))
    return value.unflatten(-1, (model.config.num_attention_heads, -1))


def mlp_hidden(model, ids, mask, layer: int) -> torch.Tensor:
    """``(B, T, intermediate)``: the MLP neurons of ``layer``, the input of its down projection."""
    return _input_of(model, ids, mask, _module(model, layer, 1))


def logits_with_head_patch(model, ids, mask, layer: int, head: int, value: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, T, V)`` logits with head ``head`` of ``layer`` replaced by ``value`` ``(B, T, head_dim)``, or
    zeroed (ablated) when ``value`` is None."""

    def patch(_, args):
        x = args[0].clone()
        width = x.shape[-1] // model.config.num_attention_heads
        x[..., head * width : (head + 1) * width] = 0.0 if value is None else value
        return (x, *args[1:])

    with torch.inference_mode(), _pre_hook(_module(model, layer, 0), patch):
        return model(input_ids=ids, attention_mask=mask).logits


def logits_with_neuron_patch(model, ids, mask, layer: int, neuron: int, value: torch.Tensor, position) -> torch.Tensor:
    """``(B, T, V)`` logits with MLP neuron ``neuron`` of ``layer`` set to ``value[b]`` at ``position[b]`` only."""

    def patch(_, args):
        x = args[0].clone()
        for b, p in enumerate(position):
            x[b, int(p), neuron] = value[b]
        return (x, *args[1:])

    with torch.inference_mode(), _pre_hook(_module(model, layer, 1), patch):
        return model(input_ids=ids, attention_mask=mask).logits
