"""The PyTorch references of head interventions agree with themselves: tests/torch_hooks.py on tiny random
GPT-2 and Llama models, and benchmarks/mediation_reference.py's two implementations (Vig et al. 2020)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch_hooks import head_output, logits_with_head_patch, mlp_hidden  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from mediation_reference import hooks_batched, hooks_per_example  # noqa: E402

SMALL = {"vocab_size": 61, "num_hidden_layers": 2, "num_attention_heads": 4, "initializer_range": 0.2}


def _tiny(family: str):
    torch.manual_seed(0)
    if family == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_positions=32, **SMALL)
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.LlamaConfig(
        hidden_size=32, intermediate_size=48, num_key_value_heads=2, max_position_embeddings=32, **SMALL
    )
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_zeroing_a_head_changes_logits_and_patching_its_own_value_changes_nothing(family):
    model = _tiny(family)
    ids = torch.tensor([[5, 9, 2, 40, 7], [3, 8, 11, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask).logits
    heads = head_output(model, ids, mask, 1)
    assert heads.shape == (2, 5, 4, 8)
    assert mlp_hidden(model, ids, mask, 0).shape[:2] == (2, 5)
    assert torch.equal(logits_with_head_patch(model, ids, mask, 1, 2, heads[:, :, 2]), logits)
    ablated = logits_with_head_patch(model, ids, mask, 1, 2)
    assert (ablated - logits).abs().max() > 1e-3
    assert torch.equal(ablated, logits_with_head_patch(model, ids, mask, 1, 2, torch.zeros(2, 5, 8)))


def test_mediation_reference_implementations_agree_on_a_tiny_llama():
    model = _tiny("llama")
    base = [[4, 17, 9, 30], [4, 22, 9, 31, 5, 6], [4, 18, 9, 30]]
    alt = [[4, 50, 9, 30], [4, 51, 9, 31, 5, 6], [4, 51, 9, 30]]
    anti, stereo = [12, 13, 12], [13, 12, 13]
    batched = hooks_batched(model, base, alt, anti, stereo)
    for other in (hooks_per_example(model, base, alt, anti, stereo), hooks_batched(model, base, alt, anti, stereo, 1)):
        for ours, theirs in zip(batched, other):
            # torch float32 in other batch shapes: y = exp(logit difference), the logits of the tiny Llama
            # (2 layers + the head, inner 64, |logits| < 1) within f32_chain(3, 64, 1) = 6e-6 each: y within
            # 1.2e-5 relative, which rtol=1e-5 with atol=1e-5 (y ~ 1) gives
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    assert batched.y_indirect.shape == batched.y_direct.shape == (3, 2, 4)
    assert np.abs(batched.y_indirect - batched.y_base[:, None, None]).max() > 1e-3  # the heads matter

    # one entry against tests/torch_hooks.py: base with head (1, 3) set to its value on alt
    ids = torch.tensor([base[1]])
    value = head_output(model, torch.tensor([alt[1]]), torch.ones_like(ids), 1)[:, :, 3]
    last = logits_with_head_patch(model, ids, torch.ones_like(ids), 1, 3, value)[0, -1]
    np.testing.assert_allclose(
        batched.y_indirect[1, 1, 3], torch.exp(last[anti[1]] - last[stereo[1]]).item(), rtol=1e-5
    )

    same = hooks_batched(model, base, base, anti, stereo)  # alt == base: every patch is a no-op, exactly
    np.testing.assert_array_equal(same.y_alt, same.y_base)
    for patched in (same.y_indirect, same.y_direct):
        np.testing.assert_array_equal(patched, np.broadcast_to(same.y_base[:, None, None], patched.shape))
