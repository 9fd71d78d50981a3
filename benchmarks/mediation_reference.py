"""The PyTorch reference of causal mediation over attention heads (Vig et al. 2020) for the benchmarks.

For each example, ``base_ids`` is a template filled with a profession and ``alt_ids`` the same template
with the profession replaced by the anti-stereotypical gender word (the same number of tokens);
``anti[i]`` and ``stereo[i]`` are the next-token ids of the anti-stereotypical and the stereotypical
pronoun. y = p(anti) / p(stereo) after the last token = exp(logit_anti - logit_stereo). A head is its
output before the attention output projection (its columns of ``o_proj``'s input, at every position):

- ``y_indirect[i, l, h]``: y on base with head (l, h) set to its value on alt (the indirect effect's run);
- ``y_direct[i, l, h]``: y on alt with head (l, h) set to its value on base (the direct effect's run).

Two implementations for transformers' ``LlamaForCausalLM`` (e.g. ``_reference.torch_llama_from_gguf``):
:func:`hooks_batched`, batched as a competent PyTorch user would, and :func:`hooks_per_example`, one
example per forward pass as in the authors' code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import torch


class Mediation(NamedTuple):
    """y = p(anti) / p(stereo) per example: unpatched on base and alt, ``(n,)``; patched ``(n, L, H)``."""

    y_base: np.ndarray
    y_alt: np.ndarray
    y_indirect: np.ndarray
    y_direct: np.ndarray


def _check(base_ids, alt_ids, anti, stereo) -> None:
    if not len(base_ids) == len(alt_ids) == len(anti) == len(stereo):
        raise ValueError("base_ids, alt_ids, anti and stereo need one entry per example")
    for i, (base, alt) in enumerate(zip(base_ids, alt_ids)):
        if len(base) != len(alt) or not base:
            raise ValueError(
                f"example {i}: base ({len(base)} tokens) and alt ({len(alt)}) need the same non-zero length"
            )


@contextlib.contextmanager
def _pre_hooks(modules: list[torch.nn.Module], hook: Callable) -> Iterator[None]:
    handles = [module.register_forward_pre_hook(hook) for module in modules]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _patch(head: int, width: int, source: torch.Tensor) -> Callable:
    """A pre-hook setting head ``head``'s columns of the o_proj input to those of ``source``."""
    columns = slice(head * width, (head + 1) * width)

    def hook(_, args):
        x = args[0].clone()
        x[..., columns] = source[..., columns]
        return (x, *args[1:])

    return hook


def _mediate(model, base_ids, alt_ids, batches: list[list[int]], y: Callable) -> Mediation:
    """Run each batch of example indices (of one length) unpatched on base and alt, capturing every o_proj
    input, then once per head and direction with that head patched; ``y(ids, batch)`` reads the numbers."""
    config = model.config
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    width = getattr(config, "head_dim", None) or config.hidden_size // heads
    n = len(base_ids)
    y_base, y_alt = np.empty(n), np.empty(n)
    y_indirect, y_direct = np.empty((n, layers, heads)), np.empty((n, layers, heads))
    o_proj = [block.self_attn.o_proj for block in model.model.layers]

    def captured(ids, batch):
        inputs = []
        with _pre_hooks(o_proj, lambda _, args: inputs.append(args[0])):
            return y(ids, batch), inputs

    with torch.inference_mode():
        for batch in batches:
            base = torch.tensor([base_ids[i] for i in batch])
            alt = torch.tensor([alt_ids[i] for i in batch])
            y_base[batch], base_heads = captured(base, batch)
            y_alt[batch], alt_heads = captured(alt, batch)
            for layer in range(layers):
                for head in range(heads):
                    with _pre_hooks([o_proj[layer]], _patch(head, width, alt_heads[layer])):
                        y_indirect[batch, layer, head] = y(base, batch)
                    with _pre_hooks([o_proj[layer]], _patch(head, width, base_heads[layer])):
                        y_direct[batch, layer, head] = y(alt, batch)
    return Mediation(y_base, y_alt, y_indirect, y_direct)


def hooks_batched(
    model,
    base_ids: list[list[int]],
    alt_ids: list[list[int]],
    anti: list[int],
    stereo: list[int],
    max_batch: int = 512,
) -> Mediation:
    """Examples of one length batched (up to ``max_batch`` a forward pass), one head patched per pass by a
    pre-hook on its ``o_proj``; the body runs without the LM head, and y takes only the two needed rows of
    ``lm_head`` at the last position."""
    _check(base_ids, alt_ids, anti, stereo)
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(base_ids):
        by_length.setdefault(len(ids), []).append(i)
    batches = [group[s : s + max_batch] for group in by_length.values() for s in range(0, len(group), max_batch)]
    weight = model.lm_head.weight

    def y(ids: torch.Tensor, batch: list[int]) -> np.ndarray:
        direction = weight[[anti[i] for i in batch]] - weight[[stereo[i] for i in batch]]
        last = model.model(input_ids=ids).last_hidden_state[:, -1]
        return torch.exp((last * direction).sum(-1)).double().numpy()

    return _mediate(model, base_ids, alt_ids, batches, y)


def hooks_per_example(
    model, base_ids: list[list[int]], alt_ids: list[list[int]], anti: list[int], stereo: list[int]
) -> Mediation:
    """One example per forward pass of the whole model, y as the ratio of the two softmax probabilities at
    the last position, as in the authors' code."""
    _check(base_ids, alt_ids, anti, stereo)

    def y(ids: torch.Tensor, batch: list[int]) -> float:
        (i,) = batch
        probs = torch.softmax(model(input_ids=ids).logits[0, -1], -1)
        return (probs[anti[i]] / probs[stereo[i]]).item()

    return _mediate(model, base_ids, alt_ids, [[i] for i in range(len(base_ids))], y)
