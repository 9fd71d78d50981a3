"""Qwen3 port: the q/k norms and the free head dimension really act, the window by layer types, bad
checkpoints (the shared checks against transformers are in tests/test_models_conformance.py, the config
refusals in tests/test_models_refusals.py)."""

import dataclasses
import functools
import json

import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from family_specs.qwen3 import PORT
from safetensors.numpy import load_file
from tolerances import f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Forward
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import device_params
from jaxassoc.models.qwen3 import FAMILY as qwen3

VOCAB = PORT.fields["vocab_size"]


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    """(torch model, config, tensors, params): head_dim 16 != 32 / 4, GQA, tied head, window 3 on layers 1-2."""
    folder = tiny_checkpoint(PORT)
    config = qwen3.config_from_hf(json.loads((folder / "config.json").read_text()))
    tensors = load_file(folder / "model.safetensors")
    return family_specs.load_torch(PORT, folder), config, tensors, device_params(qwen3.params_from_hf(tensors, config))


def _logits(params, config, T=8):
    ids = jnp.asarray(np.random.default_rng(0).integers(3, VOCAB, size=(2, T)))
    return np.asarray(_jit_logits(params, ids, jnp.ones_like(ids), config=config)), np.asarray(ids)


@functools.partial(jax.jit, static_argnames="config")
def _jit_logits(params, ids, mask, config):
    return head_logits(params["head"], Forward(qwen3, config)(params["body"], ids, mask).hidden)


def test_logits_match_transformers_and_the_config_is_read(tiny):
    model, config, tensors, params = tiny
    assert (config.head_dim, config.sliding_window, config.local_layers) == (16, 3, (False, True, True))
    assert "lm_head.weight" not in tensors  # tied: the head comes from the embeddings
    ours, ids = _logits(params, config)
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(ids)).logits.numpy()
    assert np.abs(ours - ref).max() <= 1e-4


def test_q_and_k_norms_act(tiny):
    """Setting either per-head norm weight to ones changes the logits: both are read and applied."""
    _, config, _, params = tiny
    base, _ = _logits(params, config)
    for leaf in ("q_norm", "k_norm"):
        attn = params["body"]["layers"]["attn"]
        layers = {**params["body"]["layers"], "attn": {**attn, leaf: {"scale": jnp.ones_like(attn[leaf]["scale"])}}}
        changed, _ = _logits({**params, "body": {**params["body"], "layers": layers}}, config)
        assert np.abs(changed - base).max() > 1e-3, leaf


def test_window_acts_on_the_sliding_layers_only(tiny):
    """Without the window the logits from position 3 on differ; with it on every layer they differ again."""
    _, config, _, params = tiny
    base, _ = _logits(params, config)
    for other in (
        dataclasses.replace(config, sliding_window=None, local_layers=None),
        dataclasses.replace(config, local_layers=(True, True, True)),
    ):
        logits, _ = _logits(params, other)
        # within the window the same sums in another compiled program: float32, 3 layers + the head,
        # inner ≤ 64 (atol=1e-6 assumed one program)
        tol = f32_chain(4, 64, float(np.abs(base[:, :3]).max()))
        np.testing.assert_allclose(logits[:, :3], base[:, :3], rtol=0, atol=tol)
        assert np.abs(logits[:, 3:] - base[:, 3:]).max() > 1e-3


def test_bad_checkpoints_name_the_tensor(tiny):
    _, config, tensors, _ = tiny
    name = "model.layers.2.self_attn.k_norm.weight"
    with pytest.raises(ModelError, match=rf"missing tensors \['{name}'\]"):
        qwen3.params_from_hf({k: v for k, v in tensors.items() if k != name}, config)
    with pytest.raises(
        ModelError, match=r"model\.layers\.0\.self_attn\.q_norm\.weight: found \(8,\), expected \(16,\)"
    ):
        qwen3.params_from_hf({**tensors, "model.layers.0.self_attn.q_norm.weight": np.ones(8, np.float32)}, config)
    with pytest.raises(ModelError, match=r"unexpected tensors \['model\.layers\.0\.self_attn\.q_proj\.bias'\]"):
        qwen3.params_from_hf({**tensors, "model.layers.0.self_attn.q_proj.bias": np.ones(64, np.float32)}, config)
    untied = dataclasses.replace(config, tie_word_embeddings=False)
    with pytest.raises(ModelError, match="lm_head.weight"):
        qwen3.params_from_hf(tensors, untied)


def test_config_reads_the_released_qwen3_fields():
    """Qwen3-0.6B's config.json fields (transformers 4 style): head 128 in a 1024-wide model, no window."""
    released = {
        "model_type": "qwen3",
        "vocab_size": 151936,
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 40960,
        "max_window_layers": 28,
        "rms_norm_eps": 1e-6,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "sliding_window": None,
        "use_sliding_window": False,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "hidden_act": "silu",
    }
    config = qwen3.config_from_hf(released)
    assert (config.head_dim, config.rope_theta, config.sliding_window, config.local_layers) == (128, 1e6, None, None)
    windowed = qwen3.config_from_hf(
        {**released, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    )
    assert windowed.sliding_window == 4096 and windowed.local_layers == (False,) * 20 + (True,) * 8
