"""The llama-like decoder, built from named sub-modules: Llama, Mistral, Qwen2, Phi-3, Qwen3, Mixtral and
OLMo read their Hugging Face configs into one :class:`LlamaLikeConfig`, whose flags say what differs
(``qkv_bias``: Qwen2; ``qk_norm``: Qwen3; ``num_local_experts`` / ``num_experts_per_tok``: Mixtral's mixture
of experts in place of the MLP; ``norm="layer"`` and ``clip_qkv``: OLMo's parameter-free LayerNorm and
clamped projections; ``sliding_window`` / ``local_layers``: Mistral, Qwen2, Phi-3).

A pre-norm block, ``x + attn(attn_norm(x))`` then ``x + mlp(mlp_norm(x))`` (rotary grouped-query
:class:`~jaxassoc.models.attention.Attention`, SwiGLU :class:`~jaxassoc.models.mlp.GatedMLP` or
:class:`~jaxassoc.models.mlp.MoE`), stacked on a leading layer axis and scanned. Every member's state has
the same paths: ``{"embed", "layers": {"attn_norm": {"scale"}, "attn": {"q", "k", "v", "o", ...},
"mlp_norm": {"scale"}, "mlp": {"gate", "up", "down"} (with experts also "router")}, "final_norm":
{"scale"}}`` (OLMo's norms hold no parameters); :func:`params_from_hf` reads them from the Hugging Face
layout.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxassoc.errors import ModelError
from jaxassoc.models.attention import Attention
from jaxassoc.models.base import Head
from jaxassoc.models.causal_body import CausalBlock, CausalBody, DecoderSizes
from jaxassoc.models.checkpoint import LayerStack, TensorTaker
from jaxassoc.models.family import Family, param_shapes
from jaxassoc.models.layers import required_fields, zeros
from jaxassoc.models.mlp import GatedMLP, MoE
from jaxassoc.models.norms import ParameterFreeLayerNorm, RMSNorm
from jaxassoc.models.rope import RopeScaling, rope_tables
from jaxassoc.models.sites import tap_site


@dataclasses.dataclass(frozen=True)
class LlamaLikeConfig(DecoderSizes):
    """The hyper-parameters of a llama-like forward pass and its flags (hashable: a static argument under
    jit). Each member family's ``config_from_hf`` sets them from its HF config and refuses what none covers."""

    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float  # every norm's epsilon
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    sliding_window: int | None = None  # a token sees itself and the previous window-1 tokens
    local_layers: tuple[bool, ...] | None = None  # the layers using sliding_window (None: all)
    rope_scaling: RopeScaling | None = None  # None: unscaled rotary frequencies
    qkv_bias: bool = False  # biases on the query, key and value projections (Qwen2)
    qk_norm: bool = False  # per-head RMSNorm of queries and keys before the rotation (Qwen3)
    num_local_experts: int | None = None  # a mixture of experts in place of the MLP (Mixtral)
    num_experts_per_tok: int | None = None
    norm: str = "rms"  # "rms": RMSNorm; "gemma": x / rms(x) * (1 + w); "layer": LayerNorm without parameters (OLMo)
    clip_qkv: float | None = None  # queries, keys and values clamped to ±clip_qkv (OLMo)
    post_norms: bool = False  # Gemma: a norm after the attention and after the MLP too
    embed_scale: bool = False  # Gemma: the embeddings times sqrt(hidden_size)
    query_pre_attn_scalar: float | None = None  # Gemma: scores scaled by its -1/2 power (None: head_dim's)
    attn_logit_softcapping: float | None = None  # Gemma 2: c tanh(s / c) on the attention scores
    final_logit_softcapping: float | None = None  # Gemma: the head's soft-cap of the logits
    mlp_activation: str = "silu"  # the gate's activation: silu (SwiGLU) or a GELU (Gemma's GeGLU)
    rope_local_theta: float | None = None  # Gemma 3: the local layers' rotary base (unscaled)

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings


def make_norm(config: LlamaLikeConfig, *, lead: tuple[int, ...] = ()) -> nnx.Module:
    """The config's norm over ``hidden_size``: RMSNorm (Gemma's ``1 + w`` form), or OLMo's parameter-free
    LayerNorm."""
    if config.norm == "layer":
        return ParameterFreeLayerNorm(config.rms_norm_eps)
    return RMSNorm(config.hidden_size, config.rms_norm_eps, plus_one=config.norm == "gemma", lead=lead)


class LlamaLikeBlock(CausalBlock):
    """One decoder layer from a llama-like config (``hidden_size``, ``intermediate_size``, heads, ``head_dim``,
    ``rms_norm_eps``, the flags ``qkv_bias``, ``qk_norm`` and, for a mixture of experts, ``num_local_experts``
    and ``num_experts_per_tok``); ``lead`` stacks the layers' parameters."""

    def __init__(self, config: LlamaLikeConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, eps = c.hidden_size, c.rms_norm_eps
        self.attn_norm = make_norm(c, lead=lead)
        self.attn = Attention(
            D,
            c.num_attention_heads,
            c.num_key_value_heads,
            c.head_dim,
            eps=eps,
            qkv_bias=c.qkv_bias,
            qk_norm=c.qk_norm,
            norm_plus_one=c.norm == "gemma",
            clip=c.clip_qkv,
            scale=None if c.query_pre_attn_scalar is None else c.query_pre_attn_scalar**-0.5,
            softcap=c.attn_logit_softcapping,
            lead=lead,
        )
        self.mlp_norm = make_norm(c, lead=lead)
        if c.num_local_experts:
            self.mlp = MoE(D, c.intermediate_size, c.num_local_experts, c.num_experts_per_tok, lead=lead)
        else:
            self.mlp = GatedMLP(D, c.intermediate_size, activation=c.mlp_activation, lead=lead)
        if c.post_norms:
            self.post_attn_norm = make_norm(c, lead=lead)
            self.post_mlp_norm = make_norm(c, lead=lead)

    def project(self, x, rope, tap=None):
        """Queries, rotated keys and values of the layer's normalised input (the site ``attn.in``); ``rope`` is
        ``(cos, sin)``."""
        return self.attn.project(tap_site(tap, "attn.in", self.attn_norm(x)), rope, tap)

    def attend(self, x, q, k, v, allowed, bias=None, tap=None):
        """``x + attn`` (queries of x's tokens over the given keys/values), then ``x + mlp(mlp_norm(x))``; with
        ``post_norms`` each sublayer's output is normalised before it is added (Gemma). Sites ``attn.out``,
        ``resid_mid``, ``mlp.in``, ``mlp.out`` of ``tap`` (:mod:`jaxassoc.models.sites`)."""
        attended = self.attn.attend(q, k, v, allowed, bias, tap)
        x = x + tap_site(
            tap, "attn.out", self.post_attn_norm(attended) if hasattr(self, "post_attn_norm") else attended
        )
        x = tap_site(tap, "resid_mid", x)
        out = self.mlp(tap_site(tap, "mlp.in", self.mlp_norm(x)), tap)
        return x + tap_site(tap, "mlp.out", self.post_mlp_norm(out) if hasattr(self, "post_mlp_norm") else out)


class LlamaLike(CausalBody):
    """The llama-like body: token embeddings ``embed``, the stacked ``layers`` (:class:`LlamaLikeBlock`), the
    ``final_norm``, rotary tables (scaled by ``rope_scaling``) and the sliding window on ``local_layers``."""

    def __init__(self, config: LlamaLikeConfig):
        c = config
        self.embed = zeros(c.vocab_size, c.hidden_size, axes=("vocab", "embed"))
        self.layers = LlamaLikeBlock(config, lead=(c.num_hidden_layers,))
        self.final_norm = make_norm(c)
        self.n_layers = c.num_hidden_layers
        self.window = c.sliding_window
        self.local_layers = c.local_layers
        self.config = config

    def embed_inputs(self, input_ids, positions):
        embedded = super().embed_inputs(input_ids, positions)
        if self.config.embed_scale:
            return embedded * jnp.asarray(math.sqrt(self.config.hidden_size), embedded.dtype)
        return embedded

    def block_positions(self, positions, dtype):
        """The rotary ``(cos, sin)``; Gemma 3: (global, local) tables, computed once outside the layer scan."""
        c = self.config
        full = rope_tables(positions, c.head_dim, c.rope_theta, dtype, c.rope_scaling)
        if c.rope_local_theta is None:
            return full
        return full, rope_tables(positions, c.head_dim, c.rope_local_theta, dtype)

    def layer_positions(self, at, local):
        if self.config.rope_local_theta is None:
            return at
        full, windowed = at
        return jax.tree.map(lambda glob, loc: jnp.where(local, loc, glob), full, windowed)


def new_body(config: Any, body: Mapping | None = None) -> LlamaLike:
    """The body module (zero parameters); every body of one config has the same structure."""
    return LlamaLike(config)


_SANDWICH_NORMS = {
    "post_attn_norm": "post_attention_layernorm",
    "mlp_norm": "pre_feedforward_layernorm",
    "post_mlp_norm": "post_feedforward_layernorm",
}
"""Gemma's norms around the MLP (``post_norms``); without them the norm before the MLP is HF's
``post_attention_layernorm``."""

_ATTENTION = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "q_norm": "q_norm", "k_norm": "k_norm"}
"""Our attention sub-module -> its Hugging Face name under ``self_attn``."""


def params_from_hf(tensors: Mapping[str, np.ndarray], config: Any) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face tensors (``model.layers.N.self_attn.q_proj.weight``, ...), each
    layer's stacked on a leading axis and projections transposed to ``(in, out)``; the head is a separate
    copy even for tied checkpoints. One ModelError names every missing, unexpected or misshapen tensor."""
    tensors = {k: v for k, v in tensors.items() if not k.endswith("rotary_emb.inv_freq")}  # old checkpoints
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    take = TensorTaker(tensors, prefixes=("model.",), outside=("lm_head.",))
    n, layer = config.num_hidden_layers, shapes["layers"]
    hf_names = {  # our sub-module -> its Hugging Face module inside a layer
        "attn_norm": "input_layernorm",
        **{name: f"self_attn.{hf}" for name, hf in _ATTENTION.items()},
        **(_SANDWICH_NORMS if config.post_norms else {"mlp_norm": "post_attention_layernorm"}),
    }
    layers = {
        "attn": {
            name: take.stacked(f"layers.{{}}.{hf_names[name]}", n, leaves) for name, leaves in layer["attn"].items()
        },
        "mlp": _mlp(take, config, layer["mlp"]),
    }
    for norm in ("attn_norm", "mlp_norm", "post_attn_norm", "post_mlp_norm"):  # OLMo's: parameter-free
        if norm in layer:
            layers[norm] = take.stacked(f"layers.{{}}.{hf_names[norm]}", n, layer[norm])
    embed = take.take("embed_tokens.weight", shapes["embed"])
    head_W = take.head(embed, config.tie_word_embeddings)
    body = {"embed": embed, "layers": layers}
    if "final_norm" in shapes:
        body["final_norm"] = take.module("norm", shapes["final_norm"])
    take.finish(config.model_type)
    return {"body": body, "head": Head(W=head_W, b=None, softcap=config.final_logit_softcapping)}


def _mlp(take: TensorTaker, config: Any, shapes: Mapping[str, Any]) -> dict:
    """The MLP's (or the experts') stacked leaves, from either expert layout of the hub."""
    n = config.num_hidden_layers
    if not config.num_local_experts:
        return {name: take.stacked(f"layers.{{}}.mlp.{name}_proj", n, leaves) for name, leaves in shapes.items()}
    fused = any(".mlp.experts." in name for name in take.tensors)
    read = _fused_experts if fused else _per_expert
    per_layer = [read(take, i, config, {leaf: s["w"][1:] for leaf, s in shapes.items()}) for i in range(n)]
    return {leaf: {"w": LayerStack([layer[leaf] for layer in per_layer])} for leaf in shapes}


_EXPERT = {"gate": "w1", "up": "w3", "down": "w2"}  # our expert leaf -> the hub's per-expert name


def _per_expert(take: TensorTaker, i: int, config: Any, shapes: dict) -> dict[str, Any]:
    """Layer ``i``'s router and experts from the hub layout (``block_sparse_moe.experts.J.w1``, ...)."""
    moe = f"layers.{i}.block_sparse_moe"
    out = {"router": take.take(f"{moe}.gate.weight", shapes["router"], transpose=True)}
    for leaf, name in _EXPERT.items():
        out[leaf] = LayerStack(
            [
                take.take(f"{moe}.experts.{j}.{name}.weight", shapes[leaf][1:], transpose=True)
                for j in range(config.num_local_experts)
            ]
        )
    return out


def _fused_experts(take: TensorTaker, i: int, config: Any, shapes: dict) -> dict[str, np.ndarray]:
    """Layer ``i``'s router and experts from transformers 5's fused 3-D layout (views, no copy)."""
    E, D, F = config.num_local_experts, config.hidden_size, config.intermediate_size
    gate_up = take.take(f"layers.{i}.mlp.experts.gate_up_proj", (E, 2 * F, D))
    down = take.take(f"layers.{i}.mlp.experts.down_proj", (E, D, F))
    return {
        "router": take.take(f"layers.{i}.mlp.gate.weight", shapes["router"], transpose=True),
        "gate": gate_up[:, :F].transpose(0, 2, 1),
        "up": gate_up[:, F:].transpose(0, 2, 1),
        "down": down.transpose(0, 2, 1),
    }


def family(
    name: str,
    config_from_hf: Callable[[dict], LlamaLikeConfig],
    *,
    model_types: Mapping[str, str] | None = None,
    params: Callable[[Mapping[str, np.ndarray], LlamaLikeConfig], dict] = params_from_hf,
) -> Family:
    """The Family of a llama-like member: its config reader (and, for fused checkpoints, its parameter
    reader); the rest is this decoder's."""
    return Family(
        name=name,
        model_types=model_types or {name: name},
        objective="causal",
        config_from_hf=config_from_hf,
        params_from_hf=params,
        new_body=new_body,
    )


def config_from_fields(
    hf_config: Mapping[str, Any],
    model_type: str,
    *,
    head_dim_default: int | None = None,
    tie_default: bool = False,
    **fields: Any,
) -> LlamaLikeConfig:
    """A LlamaLikeConfig of the fields every llama-like HF config names alike (sizes, heads, ``head_dim``,
    ``rms_norm_eps``, context, tied head) and the family's own ``fields`` (its flags, rotary settings...).
    ModelError naming a missing field, query heads that are not a multiple of the key/value heads, or an odd
    ``head_dim`` (rotary embeddings rotate pairs)."""
    with required_fields(model_type):
        hidden = int(hf_config["hidden_size"])
        heads = int(hf_config["num_attention_heads"])
        kv_heads = int(hf_config.get("num_key_value_heads") or heads)
        common = dict(
            model_type=model_type,
            vocab_size=int(hf_config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(hf_config["intermediate_size"]),
            num_hidden_layers=int(hf_config["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=kv_heads,
            head_dim=int(hf_config.get("head_dim", head_dim_default) or hidden // heads),
            max_position_embeddings=int(hf_config["max_position_embeddings"]),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", tie_default)),
        )
        if "rms_norm_eps" not in fields:
            common["rms_norm_eps"] = float(hf_config["rms_norm_eps"])
        config = LlamaLikeConfig(**common, **fields)
    if heads % kv_heads:
        raise ModelError(
            f"{model_type} config: num_attention_heads = {heads} is not a multiple of num_key_value_heads = {kv_heads}"
        )
    if config.head_dim % 2:
        raise ModelError(f"{model_type} config: head_dim = {config.head_dim} must be even for rotary embeddings")
    return config
