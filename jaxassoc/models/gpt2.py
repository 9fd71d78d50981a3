"""GPT-2 (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners") as a pure port.

Pre-LayerNorm decoder: ``h = h + attn(ln_1(h)); h = h + mlp(ln_2(h))``, final ``ln_f``, learned
absolute positions, ``gelu_new`` (tanh GELU) in the MLP. HF's ``Conv1D`` weights are stored
``(in, out)``, which is already the ``x @ w`` layout used here. Position ids come from the cumulative sum
of the attention mask, so left- and right-padded batches give the same states for the real tokens.

Plain ``jax.numpy`` over parameter pytrees (see :mod:`jaxassoc.models.layers` for why not linen modules);
the blocks are stacked and scanned.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput, Head
from jaxassoc.models.checkpoint import TensorTaker
from jaxassoc.models.layers import (
    ACTIVATIONS,
    KVCache,
    attention,
    causal_allowed,
    check_activation,
    dense,
    head_scale,
    layer_norm,
    merge_heads,
    positions_from_mask,
    required_fields,
    split_heads,
    write_columns,
)

MODEL_TYPES: tuple[str, ...] = ("gpt2",)
OBJECTIVE = "causal"



@dataclasses.dataclass(frozen=True)
class GPT2Config:
    vocab_size: int
    n_positions: int
    d_model: int
    n_layer: int
    n_head: int
    d_inner: int
    layer_norm_eps: float
    activation: str
    scale_attn_weights: bool
    tie_word_embeddings: bool

    @property
    def max_positions(self) -> int:
        return self.n_positions


def config_from_hf(hf_config: dict) -> GPT2Config:
    """A GPT2Config from a HF ``config.json``; refuses options this port does not implement."""
    if hf_config.get("model_type") not in MODEL_TYPES:
        raise ModelError(f"gpt2 port: model_type {hf_config.get('model_type')!r} is not one of {MODEL_TYPES}")
    refused = {
        "add_cross_attention": False,
        "scale_attn_by_inverse_layer_idx": False,
    }
    for field, supported in refused.items():
        if hf_config.get(field, supported) != supported:
            raise ModelError(
                f"GPT-2 config field {field}={hf_config[field]!r} is not supported (only {supported!r})"
            )
    with required_fields("gpt2"):
        return _config(hf_config)


def _config(hf_config: dict) -> GPT2Config:
    d_model = int(hf_config["n_embd"])
    return GPT2Config(
        vocab_size=int(hf_config["vocab_size"]),
        n_positions=int(hf_config["n_positions"]),
        d_model=d_model,
        n_layer=int(hf_config["n_layer"]),
        n_head=int(hf_config["n_head"]),
        d_inner=int(hf_config.get("n_inner") or 4 * d_model),
        layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-5)),
        activation=check_activation(hf_config.get("activation_function", "gelu_new"), "activation_function"),
        scale_attn_weights=bool(hf_config.get("scale_attn_weights", True)),
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", True)),
    )


def params_from_hf(tensors: Mapping[str, np.ndarray], config: GPT2Config) -> dict:
    """``{"body", "head"}`` from HF GPT-2 tensors (``transformer.`` prefix optional); the head is untied."""
    c = config
    D, L, F, V = c.d_model, c.n_layer, c.d_inner, c.vocab_size
    # Older checkpoints carry the causal-mask buffers attn.bias / attn.masked_bias: no weights.
    buffers = tuple(f"h.{i}.attn.{b}" for i in range(L) for b in ("bias", "masked_bias"))
    t = TensorTaker(tensors, prefixes=("transformer.",), ignore=buffers, outside=("lm_head.",))

    def ln(name: str) -> dict:
        return {"scale": t.stack(f"h.{{}}.{name}.weight", L, (D,)), "bias": t.stack(f"h.{{}}.{name}.bias", L, (D,))}

    def conv1d(name: str, n_in: int, n_out: int) -> dict:  # HF Conv1D weights are (in, out)
        return {
            "w": t.stack(f"h.{{}}.{name}.weight", L, (n_in, n_out)),
            "b": t.stack(f"h.{{}}.{name}.bias", L, (n_out,)),
        }

    body = {
        "wte": t.take("wte.weight", (V, D)),
        "wpe": t.take("wpe.weight", (c.n_positions, D)),
        "blocks": {
            "ln_1": ln("ln_1"),
            "c_attn": conv1d("attn.c_attn", D, 3 * D),
            "c_proj": conv1d("attn.c_proj", D, D),
            "ln_2": ln("ln_2"),
            "c_fc": conv1d("mlp.c_fc", D, F),
            "mlp_proj": conv1d("mlp.c_proj", F, D),
        },
        "ln_f": {"scale": t.take("ln_f.weight", (D,)), "bias": t.take("ln_f.bias", (D,))},
    }
    # The head is untied: its own lm_head if the checkpoint has one, else a copy of wte.
    if t.has("lm_head.weight") or not c.tie_word_embeddings:
        W = t.take("lm_head.weight", (V, D))
    else:
        W = body["wte"]  # placing the params gives the head its own device buffer
    t.finish("GPT-2")
    return {"body": body, "head": Head(W=W, b=None)}


def _project(h: jax.Array, p: dict, config: GPT2Config):
    """Queries, keys and values ``(B, T, H, K)`` of one block's input."""
    q, k, v = jnp.split(dense(layer_norm(h, p["ln_1"], config.layer_norm_eps), p["c_attn"]), 3, axis=-1)
    return tuple(split_heads(a, config.n_head) for a in (q, k, v))


def _attend(h: jax.Array, p: dict, q, k, v, allowed: jax.Array, config: GPT2Config) -> jax.Array:
    """``h + Attn`` (queries of h's tokens over the given keys/values) then ``h + MLP(LayerNorm(h))``."""
    c = config
    scale = head_scale(c.d_model // c.n_head) if c.scale_attn_weights else 1.0
    h = h + dense(merge_heads(attention(q, k, v, allowed, scale)), p["c_proj"])
    x = layer_norm(h, p["ln_2"], c.layer_norm_eps)
    return h + dense(ACTIVATIONS[c.activation](dense(x, p["c_fc"])), p["mlp_proj"])


def _block(h: jax.Array, p: dict, allowed: jax.Array, config: GPT2Config) -> jax.Array:
    return _attend(h, p, *_project(h, p, config), allowed, config)


def forward(
    body: dict,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    *,
    config: GPT2Config,
    all_layers: bool = False,
) -> ForwardOutput:
    """Final hidden states after ``ln_f`` (the head input), and optionally HF's ``hidden_states``.

    As in HF, ``layers`` holds the embedding output and the input of every later block, and its last
    entry is the final output *after* ``ln_f`` (equal to ``hidden``).
    """
    positions = positions_from_mask(attention_mask)
    embedded = jnp.take(body["wte"], input_ids, axis=0) + jnp.take(body["wpe"], positions, axis=0)
    allowed = causal_allowed(attention_mask)

    def step(h, p):
        out = _block(h, p, allowed, config)
        return out, (out if all_layers else None)

    h, per_layer = jax.lax.scan(step, embedded, body["blocks"])
    hidden = layer_norm(h, body["ln_f"], config.layer_norm_eps)
    layers = None
    if all_layers:
        layers = (embedded, *(per_layer[i] for i in range(config.n_layer - 1)), hidden)
    return ForwardOutput(hidden=hidden, layers=layers)



def init_cache(config: GPT2Config, batch: int, length: int, dtype=jnp.float32) -> KVCache:
    """An empty cache for ``batch`` rows of ``length`` columns (prompt + new tokens)."""
    shape = (config.n_layer, batch, length, config.n_head, config.d_model // config.n_head)
    return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))


def forward_cached(
    body: dict,
    input_ids: Int[Array, "B t"],
    attention_mask: Int[Array, "B T"],
    cache: KVCache,
    start: Int[Array, ""],
    *,
    config: GPT2Config,
    positions: Int[Array, "B t"] | None = None,
    allowed: Bool[Array, "B 1 t T"] | None = None,
) -> tuple[Float[Array, "B t D"], KVCache]:
    """Hidden states (after ``ln_f``) of the tokens at columns ``[start, start + t)`` of rows described by
    the full-length mask, reading earlier keys/values from ``cache`` and writing these tokens' into it.

    ``positions`` (the new tokens' position ids) and ``allowed`` (which of the T cache columns each new
    token attends to) override what the mask implies, e.g. for continuations packed after a shared prefix
    (:mod:`jaxassoc.models.continuations`)."""
    t = input_ids.shape[1]
    if positions is None:
        positions = jax.lax.dynamic_slice_in_dim(positions_from_mask(attention_mask), start, t, axis=1)
    h = jnp.take(body["wte"], input_ids, axis=0) + jnp.take(body["wpe"], positions, axis=0)
    if allowed is None:
        allowed = jax.lax.dynamic_slice_in_dim(causal_allowed(attention_mask), start, t, axis=2)

    def step(h, xs):
        p, k_all, v_all = xs
        q, k, v = _project(h, p, config)
        k_all, v_all = write_columns(k_all, v_all, k, v, start)
        return _attend(h, p, q, k_all, v_all, allowed, config), (k_all, v_all)

    h, (k, v) = jax.lax.scan(step, h, (body["blocks"], cache.k, cache.v))
    return layer_norm(h, body["ln_f"], config.layer_norm_eps), KVCache(k, v)
