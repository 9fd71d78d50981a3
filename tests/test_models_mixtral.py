"""Mixtral port: the routed mixture of experts against a NumPy reference and transformers' layer, routing
that really selects, both expert layouts, bad checkpoints (the shared checks against transformers are in
tests/test_models_conformance.py, the config refusals in tests/test_models_refusals.py)."""

import dataclasses
import functools
import json

import family_specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from family_specs.mixtral import BASE, PORT
from safetensors.numpy import load_file
from tolerances import f32_chain

from jaxassoc.errors import ModelError
from jaxassoc.models.base import Forward
from jaxassoc.models.heads import head_logits
from jaxassoc.models.mesh import device_params
from jaxassoc.models.mixtral import FAMILY as mixtral
from jaxassoc.models.mlp import moe

VOCAB = PORT.fields["vocab_size"]


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    """(torch model, config, hub-layout tensors, params): 4 experts, top-2, GQA, a decisive router."""
    folder = tiny_checkpoint(PORT)
    config = mixtral.config_from_hf(json.loads((folder / "config.json").read_text()))
    tensors = load_file(folder / "model.safetensors")
    return (
        family_specs.load_torch(PORT, folder),
        config,
        tensors,
        device_params(mixtral.params_from_hf(tensors, config)),
    )


def _ids(T=9, rows=3, seed=0):
    ids = np.random.default_rng(seed).integers(3, VOCAB, size=(rows, T))
    return jnp.asarray(ids), jnp.ones((rows, T), jnp.int32)


@functools.partial(jax.jit, static_argnames="config")
def _jit_logits(params, ids, mask, config):
    return head_logits(params["head"], Forward(mixtral, config)(params["body"], ids, mask).hidden)


def _logits(params, config, ids, mask):
    return np.asarray(_jit_logits(params, ids, mask, config=config))


def numpy_moe(h, router, gate, up, down, k):
    """Mixtral's sparse MoE token by token: softmax over experts, top k renormalised, chosen SwiGLUs summed."""
    out = np.zeros_like(h)
    for t, x in enumerate(h):
        logits = x @ router
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        chosen = np.argsort(-probs)[:k]
        for e in chosen:
            a, b = x @ gate[e], x @ up[e]
            out[t] += probs[e] / probs[chosen].sum() * ((a / (1 + np.exp(-a)) * b) @ down[e])
    return out


def test_moe_layer_matches_a_per_token_numpy_reference_and_transformers(tiny):
    model, config, _, params = tiny
    layer = {k: np.asarray(v["w"][1], np.float64) for k, v in params["body"]["layers"]["mlp"].items()}
    h = np.random.default_rng(1).normal(size=(2, 7, config.hidden_size))
    ours = np.asarray(
        moe(
            jnp.asarray(h, jnp.float32),
            *(jnp.asarray(layer[k], jnp.float32) for k in ("router", "gate", "up", "down")),
            k=2,
        )
    )
    for k in (1, 2, 4):
        got = np.asarray(
            moe(
                *(jnp.asarray(a, jnp.float32) for a in (h, layer["router"], layer["gate"], layer["up"], layer["down"])),
                k=k,
            )
        )
        want = np.stack([numpy_moe(row, layer["router"], layer["gate"], layer["up"], layer["down"], k) for row in h])
        assert np.abs(got - want).max() <= 1e-5, k
    with torch.no_grad():
        ref = model.model.layers[1].mlp(torch.tensor(h, dtype=torch.float32)).numpy()
    assert np.abs(ours - ref).max() <= 1e-5


def test_routing_really_selects(tiny):
    """top-1, top-2 and all-4 experts give different logits, and the top-2 ones are transformers'."""
    model, config, _, params = tiny
    ids, mask = _ids()
    by_k = {k: _logits(params, dataclasses.replace(config, num_experts_per_tok=k), ids, mask) for k in (1, 2, 4)}
    assert np.abs(by_k[1] - by_k[2]).max() > 1e-3  # 10x the conformance tolerance
    assert np.abs(by_k[2] - by_k[4]).max() > 1e-3
    with torch.no_grad():
        ref = model(input_ids=torch.tensor(np.asarray(ids))).logits.numpy()
    assert np.abs(by_k[2] - ref).max() <= 1e-4


def test_exactly_the_chosen_experts_count(tiny):
    """For one token, scaling one layer-0 expert's down projection moves the logits for exactly top-k experts."""
    _, config, _, params = tiny
    ids, mask = jnp.asarray([[5]]), jnp.ones((1, 1), jnp.int32)
    body = params["body"]
    base = _logits(params, config, ids, mask)

    def scaled(e):
        mlp = body["layers"]["mlp"]
        down = {"w": mlp["down"]["w"].at[0, e].multiply(3.0)}
        return {**params, "body": {**body, "layers": {**body["layers"], "mlp": {**mlp, "down": down}}}}

    moved = [np.abs(_logits(scaled(e), config, ids, mask) - base).max() > 1e-4 for e in range(config.num_local_experts)]
    assert sum(moved) == config.num_experts_per_tok, moved


def test_the_fused_transformers_5_layout_loads_the_same_parameters(tiny):
    _, config, tensors, params = tiny
    F = config.intermediate_size
    fused = {k: v for k, v in tensors.items() if ".block_sparse_moe." not in k}
    for i in range(config.num_hidden_layers):
        moe_ = f"model.layers.{i}.block_sparse_moe"

        def expert(w, moe_=moe_):
            return np.stack([tensors[f"{moe_}.experts.{j}.{w}.weight"] for j in range(config.num_local_experts)])

        fused[f"model.layers.{i}.mlp.gate.weight"] = tensors[f"{moe_}.gate.weight"]
        fused[f"model.layers.{i}.mlp.experts.gate_up_proj"] = np.concatenate([expert("w1"), expert("w3")], axis=1)
        fused[f"model.layers.{i}.mlp.experts.down_proj"] = expert("w2")
    assert fused["model.layers.0.mlp.experts.gate_up_proj"].shape == (4, 2 * F, config.hidden_size)
    loaded = device_params(mixtral.params_from_hf(fused, config))
    for (path, value), (_, got) in zip(
        jax.tree_util.tree_leaves_with_path(params["body"]), jax.tree_util.tree_leaves_with_path(loaded["body"])
    ):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(value), err_msg=jax.tree_util.keystr(path))
    missing = {k: v for k, v in fused.items() if k != "model.layers.1.mlp.experts.down_proj"}
    with pytest.raises(ModelError, match=r"model\.layers\.1\.mlp\.experts\.down_proj"):
        mixtral.params_from_hf(missing, config)


def test_bad_checkpoints_name_the_tensor(tiny):
    _, config, tensors, _ = tiny
    name = "model.layers.1.block_sparse_moe.experts.3.w2.weight"
    with pytest.raises(ModelError, match=rf"missing tensors \['{name}'\]"):
        mixtral.params_from_hf({k: v for k, v in tensors.items() if k != name}, config)
    router = "model.layers.0.block_sparse_moe.gate.weight"
    with pytest.raises(ModelError, match=rf"{router}: found \(5, 32\), expected \(4, 32\)"):  # (out, in) as stored
        mixtral.params_from_hf({**tensors, router: np.zeros((5, 32), np.float32)}, config)
    extra = "model.layers.0.block_sparse_moe.experts.4.w1.weight"
    with pytest.raises(ModelError, match=rf"unexpected tensors \['{extra}'\]"):
        mixtral.params_from_hf({**tensors, extra: np.zeros((24, 32), np.float32)}, config)
    with pytest.raises(ModelError, match="lm_head.weight"):
        mixtral.params_from_hf({k: v for k, v in tensors.items() if k != "lm_head.weight"}, config)


def test_sliding_window_is_applied(tiny):
    """With a window of 3 the logits from position 3 on differ from the full attention's, not before."""
    _, config, _, params = tiny
    ids, mask = _ids(T=8)
    full = _logits(params, config, ids, mask)
    windowed = _logits(params, dataclasses.replace(config, sliding_window=3), ids, mask)
    # within the window the same sums in another compiled program: float32, 2 layers + the head, inner ≤ 64
    # (atol=1e-6 assumed one program)
    tol = f32_chain(3, 64, float(np.abs(full[:, :3]).max()))
    np.testing.assert_allclose(windowed[:, :3], full[:, :3], rtol=0, atol=tol)
    assert np.abs(windowed[:, 3:] - full[:, 3:]).max() > 1e-3


def test_training_only_router_fields_are_accepted():
    config = mixtral.config_from_hf(
        {
            **BASE,
            "router_jitter_noise": 0.1,
            "router_aux_loss_coef": 0.02,
            "output_router_logits": True,
            "scoring_func": "softmax",
            "norm_topk_prob": True,
        }
    )
    assert (config.num_local_experts, config.num_experts_per_tok) == (4, 2)
    assert config.rope_theta == 1e6  # transformers' MixtralConfig default when the field is absent
    assert mixtral.config_from_hf({**BASE, "rope_theta": 5.0, "sliding_window": 8}).sliding_window == 8
