"""Llama / Mistral decoder in plain ``jax.numpy`` (Touvron et al. 2023; Jiang et al. 2023).

A pre-norm Transformer decoder: RMSNorm (Zhang & Sennrich 2019), rotary position embeddings
(Su et al. 2021, eq. 34, in the "rotate half" layout of Hugging Face checkpoints), grouped-query
attention (Ainslie et al. 2023), SwiGLU feed-forward (Shazeer 2020) and, for Mistral, a sliding-window
causal mask. The layers' parameters are stacked on a leading axis and run with ``jax.lax.scan``, so a
30-layer model compiles one block.

Numerics follow ``transformers.models.llama.modeling_llama``: RMSNorm and softmax in float32, rotary
angles from float32 position ids, everything else in the parameters' dtype (fp32 by default; cast the
params to bf16 for bf16). Position ids come from the cumulative sum of the attention mask, so a
left-padded row gets the same positions, hence the same states, as the unpadded sequence; a mask of
segment ids runs several packed sequences in one row (``layers.positions_from_mask``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput, Head
from jaxassoc.models.checkpoint import LayerStack
from jaxassoc.models.layers import KVCache, positions_from_mask, segment_allowed, write_columns

MODEL_TYPES = ("llama", "mistral")
OBJECTIVE = "causal"


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """The hyper-parameters the forward pass needs (hashable: a static argument under jit)."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    sliding_window: int | None = None  # Mistral: a token sees itself and the previous window-1 tokens

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings


def _rope_theta(hf_config: dict) -> float:
    """``rope_theta`` from a transformers 4 (``rope_theta``/``rope_scaling``) or 5 (``rope_parameters``) config."""
    params = hf_config.get("rope_parameters") or {}
    scaling = hf_config.get("rope_scaling")
    rope_type = params.get("rope_type", "default")
    if scaling is not None:
        rope_type = scaling.get("rope_type", scaling.get("type"))
    if rope_type != "default":
        raise ModelError(
            f"rope scaling {rope_type!r} is not supported by the llama port: only unscaled rotary "
            "embeddings (rope_type 'default') are; 'linear', 'dynamic', 'yarn', 'longrope' and 'llama3' "
            "are refused"
        )
    return float(params.get("rope_theta", hf_config.get("rope_theta", 10000.0)))


def config_from_hf(hf_config: dict) -> LlamaConfig:
    """A LlamaConfig from a transformers ``config.json`` dict; ModelError for what the port does not implement."""
    model_type = hf_config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise ModelError(f"model_type {model_type!r} is not a llama-family model; expected one of {MODEL_TYPES}")
    refused = {
        "hidden_act": (hf_config.get("hidden_act", "silu"), "silu"),
        "attention_bias": (bool(hf_config.get("attention_bias", False)), False),
        "mlp_bias": (bool(hf_config.get("mlp_bias", False)), False),
        "num_local_experts": (hf_config.get("num_local_experts"), None),
    }
    for key, (value, supported) in refused.items():
        if value != supported:
            raise ModelError(
                f"{model_type} config: {key} = {value!r} is not supported by the llama port (only {supported!r})"
            )
    try:
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        config = LlamaConfig(
            model_type=model_type,
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config["intermediate_size"]),
            num_hidden_layers=int(hf_config["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=int(hf_config.get("head_dim") or hidden // heads),
            rms_norm_eps=float(hf_config["rms_norm_eps"]),
            rope_theta=_rope_theta(hf_config),
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            sliding_window=(int(hf_config["sliding_window"]) if hf_config.get("sliding_window") else None)
            if model_type == "mistral"
            else None,
        )
    except KeyError as e:
        raise ModelError(f"{model_type} config is missing the field {e.args[0]!r}") from None
    if heads % kv_heads:
        raise ModelError(
            f"{model_type} config: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
        )
    if config.head_dim % 2:
        raise ModelError(f"{model_type} config: head_dim = {config.head_dim} must be even for rotary embeddings")
    return config


def _expected_shapes(config: LlamaConfig) -> dict[str, tuple[int, ...]]:
    D, F, V = config.hidden_size, config.intermediate_size, config.vocab_size
    q, kv = config.num_attention_heads * config.head_dim, config.num_key_value_heads * config.head_dim
    layer = {
        "input_layernorm.weight": (D,),
        "self_attn.q_proj.weight": (q, D),
        "self_attn.k_proj.weight": (kv, D),
        "self_attn.v_proj.weight": (kv, D),
        "self_attn.o_proj.weight": (D, q),
        "post_attention_layernorm.weight": (D,),
        "mlp.gate_proj.weight": (F, D),
        "mlp.up_proj.weight": (F, D),
        "mlp.down_proj.weight": (D, F),
    }
    shapes = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,), "lm_head.weight": (V, D)}
    for i in range(config.num_hidden_layers):
        shapes.update({f"model.layers.{i}.{name}": shape for name, shape in layer.items()})
    return shapes


# Our stacked leaf -> (HF name inside a layer, transpose to (in, out)).
_LAYER_LEAVES = {
    "attn_norm": ("input_layernorm.weight", False),
    "q": ("self_attn.q_proj.weight", True),
    "k": ("self_attn.k_proj.weight", True),
    "v": ("self_attn.v_proj.weight", True),
    "o": ("self_attn.o_proj.weight", True),
    "mlp_norm": ("post_attention_layernorm.weight", False),
    "gate": ("mlp.gate_proj.weight", True),
    "up": ("mlp.up_proj.weight", True),
    "down": ("mlp.down_proj.weight", True),
}


def params_from_hf(tensors: Mapping[str, np.ndarray], config: LlamaConfig) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face tensors; the head is a separate copy even for tied checkpoints.

    Layer weights are stacked on a leading layer axis, projections stored as ``(in, out)`` matrices.
    Missing, unexpected or misshapen tensors raise ModelError naming them.
    """
    tensors = {k: v for k, v in tensors.items() if not k.endswith("rotary_emb.inv_freq")}  # old checkpoints
    expected = _expected_shapes(config)
    if "lm_head.weight" not in tensors:
        if not config.tie_word_embeddings:
            raise ModelError("checkpoint has no lm_head.weight and tie_word_embeddings is false: the head is missing")
        expected.pop("lm_head.weight")
    missing = sorted(set(expected) - set(tensors), key=_natural)
    extra = sorted(set(tensors) - set(expected), key=_natural)
    if missing or extra:
        raise ModelError(
            f"{config.model_type} checkpoint does not match its config: missing {missing[:6]}"
            f"{' ...' if len(missing) > 6 else ''}, unexpected {extra[:6]}{' ...' if len(extra) > 6 else ''}"
        )
    bad = [
        f"{k}: found {tuple(tensors[k].shape)}, expected {s}"
        for k, s in expected.items()
        if tuple(tensors[k].shape) != s
    ]
    if bad:
        raise ModelError(f"{config.model_type} checkpoint has tensors of the wrong shape: {bad[:6]}")

    def array(name, transpose=False):  # a view of the checkpoint's (memory-mapped) tensor
        x = np.asarray(tensors[name])
        return x.T if transpose else x

    layers = {
        leaf: LayerStack([array(f"model.layers.{i}.{name}", transpose) for i in range(config.num_hidden_layers)])
        for leaf, (name, transpose) in _LAYER_LEAVES.items()
    }
    embed = array("model.embed_tokens.weight")
    head_name = "lm_head.weight" if "lm_head.weight" in tensors else "model.embed_tokens.weight"
    head_W = array(head_name)  # untied: placing the params gives it its own device buffer
    body = {"embed": embed, "layers": layers, "norm": array("model.norm.weight")}
    return {"body": body, "head": Head(W=head_W, b=None)}


def _natural(name: str):
    return [int(p) if p.isdigit() else p for p in name.replace(".", " ").split()]


def rms_norm(x: Float[Array, "... D"], weight: Float[Array, " D"], eps: float) -> Float[Array, "... D"]:
    """RMSNorm (Zhang & Sennrich 2019, eq. 4), computed in float32 as in Llama."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight * normed.astype(x.dtype)


def rope_tables(positions: Int[Array, "B T"], head_dim: int, theta: float, dtype) -> tuple[Array, Array]:
    """cos and sin of the rotary angles ``pos * theta^(-2i/d)`` (Su et al. 2021, eq. 34), each ``(B, T, d)``."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    angles = positions.astype(jnp.float32)[..., None] * inv_freq
    angles = jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def apply_rope(x: Float[Array, "B T H d"], cos: Float[Array, "B T d"], sin: Float[Array, "B T d"]) -> Array:
    """Rotate each head's vector by its position's angles (HF "rotate half" layout)."""
    half = x.shape[-1] // 2
    rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, :, None, :] + rotated * sin[:, :, None, :]


def attention_mask_bias(attention_mask: Int[Array, "B T"], sliding_window: int | None, dtype) -> Array:
    """Additive ``(B, 1, 1, T, T)`` bias: 0 where query t may see key s (causal, same segment, in the window)."""
    T = attention_mask.shape[1]
    q, k = jnp.arange(T)[:, None], jnp.arange(T)[None, :]
    allowed = k <= q
    if sliding_window is not None and sliding_window < T:
        allowed = allowed & (k > q - sliding_window)
    allowed = allowed[None] & segment_allowed(attention_mask)
    return jnp.where(allowed, 0.0, jnp.finfo(dtype).min).astype(dtype)[:, None, None]


def _project(config: LlamaConfig, x, layer, cos, sin):
    """Queries ``(B, T, KV, G, d)``, rotated keys and values ``(B, T, KV, d)`` of one layer's input."""
    B, T, _ = x.shape
    KV, G, d = config.num_key_value_heads, config.num_attention_heads // config.num_key_value_heads, config.head_dim
    h = rms_norm(x, layer["attn_norm"], config.rms_norm_eps)
    q = apply_rope((h @ layer["q"]).reshape(B, T, KV * G, d), cos, sin).reshape(B, T, KV, G, d)
    k = apply_rope((h @ layer["k"]).reshape(B, T, KV, d), cos, sin)
    return q, k, (h @ layer["v"]).reshape(B, T, KV, d)


def _attend(config: LlamaConfig, x, layer, q, k, v, bias):
    """``x + Attn`` (queries of x's T tokens over keys/values of S tokens) then ``x + SwiGLU(RMSNorm(x))``."""
    B, T, _ = x.shape
    d = config.head_dim
    scores = jnp.einsum("btkgd,bskd->bkgts", q, k) / jnp.sqrt(jnp.asarray(d, x.dtype)) + bias
    probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(x.dtype)
    attended = jnp.einsum("bkgts,bskd->btkgd", probs, v).reshape(B, T, config.num_attention_heads * d)
    x = x + attended @ layer["o"]
    h = rms_norm(x, layer["mlp_norm"], config.rms_norm_eps)
    return x + (jax.nn.silu(h @ layer["gate"]) * (h @ layer["up"])) @ layer["down"]


def _block(config: LlamaConfig, x, layer, cos, sin, bias):
    """One decoder layer: ``x + Attn(RMSNorm(x))`` then ``x + SwiGLU(RMSNorm(x))``."""
    return _attend(config, x, layer, *_project(config, x, layer, cos, sin), bias)


@functools.partial(jax.jit, static_argnames=("config", "all_layers"))
def forward(
    body: dict,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    *,
    config: LlamaConfig,
    all_layers: bool = False,
) -> ForwardOutput:
    """Final hidden states after the last RMSNorm (the head's input), and every layer's on request.

    ``layers`` follows transformers' ``hidden_states``: the embeddings, then each block's output,
    the last one after the final norm (so ``layers[-1] == hidden``).
    """
    x = body["embed"][input_ids]
    positions = positions_from_mask(attention_mask)
    cos, sin = rope_tables(positions, config.head_dim, config.rope_theta, x.dtype)
    bias = attention_mask_bias(attention_mask, config.sliding_window, x.dtype)

    def step(x, layer):
        y = _block(config, x, layer, cos, sin, bias)
        return y, (y if all_layers else None)

    out, stacked = jax.lax.scan(step, x, body["layers"])
    hidden = rms_norm(out, body["norm"], config.rms_norm_eps)
    if not all_layers:
        return ForwardOutput(hidden=hidden, layers=None)
    layers = (x, *(stacked[i] for i in range(config.num_hidden_layers - 1)), hidden)
    return ForwardOutput(hidden=hidden, layers=layers)



def init_cache(config: LlamaConfig, batch: int, length: int, dtype=jnp.float32) -> KVCache:
    """An empty cache for ``batch`` rows of ``length`` columns (prompt + new tokens)."""
    shape = (config.num_hidden_layers, batch, length, config.num_key_value_heads, config.head_dim)
    return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))


def forward_cached(
    body: dict,
    input_ids: Int[Array, "B t"],
    attention_mask: Int[Array, "B T"],
    cache: KVCache,
    start: Int[Array, ""],
    *,
    config: LlamaConfig,
    positions: Int[Array, "B t"] | None = None,
    allowed: Bool[Array, "B 1 t T"] | None = None,
) -> tuple[Float[Array, "B t D"], KVCache]:
    """Hidden states of the tokens at columns ``[start, start + t)`` of rows described by the full-length
    mask, reading earlier columns' keys/values from ``cache`` and writing these tokens' into it.

    A prompt pass (``start = 0``, all prompt columns) followed by one-token steps gives the same states as
    :func:`forward` over the whole sequence (tested), at the cost of one token per step.

    ``positions`` (the new tokens' position ids) and ``allowed`` (which of the T cache columns each new
    token attends to) override what the mask implies, e.g. for continuations packed after a shared prefix
    (:mod:`jaxassoc.models.continuations`); Mistral's sliding window is then applied on position ids, the
    cache columns' being the mask's with the new tokens' ``positions`` written at ``start``.
    """
    t = input_ids.shape[1]
    x = body["embed"][input_ids]
    mask_positions = positions_from_mask(attention_mask)
    if positions is None:
        positions = jax.lax.dynamic_slice_in_dim(mask_positions, start, t, axis=1)
    cos, sin = rope_tables(positions, config.head_dim, config.rope_theta, x.dtype)
    if allowed is None:
        bias = jax.lax.dynamic_slice_in_dim(
            attention_mask_bias(attention_mask, config.sliding_window, x.dtype), start, t, axis=3
        )
    else:
        if config.sliding_window is not None:
            keys = jax.lax.dynamic_update_slice_in_dim(mask_positions, positions.astype(mask_positions.dtype),
                                                       start, axis=1)
            allowed = allowed & (keys[:, None, None, :] > positions[:, None, :, None] - config.sliding_window)
        bias = jnp.where(allowed, 0.0, jnp.finfo(x.dtype).min).astype(x.dtype)[:, :, None]

    def step(x, xs):
        layer, k_all, v_all = xs
        q, k, v = _project(config, x, layer, cos, sin)
        k_all, v_all = write_columns(k_all, v_all, k, v, start)
        return _attend(config, x, layer, q, k_all, v_all, bias), (k_all, v_all)

    out, (k, v) = jax.lax.scan(step, x, (body["layers"], cache.k, cache.v))
    return rms_norm(out, body["norm"], config.rms_norm_eps), KVCache(k, v)
