"""The PyTorch references of head interventions agree with themselves: tests/torch_hooks.py on tiny random
GPT-2 and Llama models."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch_hooks import head_output, logits_with_head_patch, mlp_hidden  # noqa: E402

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
