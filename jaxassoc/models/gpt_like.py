"""The GPT-like decoder, built from named sub-modules: GPT-2, GPT-Neo, GPT-NeoX / Pythia, GPT-J, OPT and MPT
read their Hugging Face configs into one :class:`GPTLikeConfig`, whose fields say what differs: the position
scheme (``positions``: learned tables, rotary on the first ``rotary_dim`` dimensions of a head in the "rotate
half" or GPT-J's interleaved layout, ALiBi), the residual (``sequential`` pre-LayerNorm, ``parallel`` as in
GPT-NeoX and GPT-J, ``post`` LayerNorm as in opt-350m), which projections have biases, the score scale and
the local layers' window (GPT-Neo).

A block is ``x + attn(attn_norm(x))`` then ``x + mlp(mlp_norm(x))`` (sequential), ``x + attn(attn_norm(x)) +
mlp(mlp_norm(x))`` (parallel; GPT-J: one norm feeds both) or ``attn_norm(x + attn(x))`` then ``mlp_norm(x +
mlp(x))`` (post), with :class:`~jaxassoc.models.attention.Attention`, a two-layer
:class:`~jaxassoc.models.mlp.MLP` and :class:`~jaxassoc.models.norms.LayerNorm`, stacked on a leading layer axis
and scanned. Every member's state has the same paths: ``{"embed", "positions" (learned), "layers":
{"attn_norm", "attn": {"q", "k", "v", "o"}, "mlp_norm" (not GPT-J), "mlp": {"up", "down"}}, "final_norm"}``
(OPT also ``project_in`` / ``project_out`` when its word embeddings are narrower, and no final norm when
post-LN). Fused checkpoint projections (GPT-2's ``c_attn``, GPT-NeoX's per-head ``query_key_value``, MPT's
``Wqkv``) are split into q, k and v when read (:func:`params_from_hf`, a family's :class:`Layout`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable, Mapping

import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxassoc.models.attention import Attention
from jaxassoc.models.base import Head
from jaxassoc.models.causal_body import CausalBlock, CausalBody, DecoderSizes
from jaxassoc.models.checkpoint import LayerStack, TensorTaker
from jaxassoc.models.family import Family, param_shapes
from jaxassoc.models.layers import check_activation, zeros
from jaxassoc.models.linear import Linear
from jaxassoc.models.mlp import MLP
from jaxassoc.models.norms import LayerNorm
from jaxassoc.models.rope import rope_tables
from jaxassoc.models.sites import tap_site

POSITIONS = ("learned", "rotary", "alibi")
RESIDUALS = ("sequential", "parallel", "post")


@dataclasses.dataclass(frozen=True)
class GPTLikeConfig(DecoderSizes):
    """The hyper-parameters of a GPT-like forward pass (hashable: a static argument under jit). Each member
    family's ``config_from_hf`` sets them from its HF config and refuses what none covers."""

    max_position_embeddings: int
    layer_norm_eps: float
    activation: str  # the MLP's (layers.ACTIVATIONS)
    tie_word_embeddings: bool
    positions: str = "learned"  # "learned" table, "rotary" or "alibi" (POSITIONS)
    position_offset: int = 0  # rows of the learned table before position 0 (OPT: 2)
    rotary_dim: int = 0  # leading dimensions of a head that rotate (GPT-NeoX, GPT-J)
    rope_theta: float = 10000.0
    rotary_pairs: bool = False  # GPT-J: rotate interleaved pairs (2i, 2i+1), not "rotate half"
    alibi_bias_max: int = 8  # MPT's ALiBi slopes 2^(-i * alibi_bias_max / n)
    residual: str = "sequential"  # RESIDUALS
    shared_norm: bool = False  # GPT-J: one norm feeds both attention and MLP
    qkv_bias: bool = True
    o_bias: bool = True
    mlp_bias: bool = True
    norm_bias: bool = True  # MPT's LayerNorms have a scale only
    head_bias: bool = False  # GPT-J's output head has a bias
    attn_scale: float | None = None  # the score scale (None: head_dim ** -1/2)
    f32_scores: bool = False  # GPT-Neo, GPT-J: queries and keys cast to float32 for the scores
    clip_qkv: float | None = None  # MPT: projections clamped to ±clip_qkv
    final_norm: bool = True  # OPT post-LN has none
    word_embed_dim: int | None = None  # OPT: narrower word embeddings, projected in and out
    sliding_window: int | None = None  # GPT-Neo's local layers: a window of positions
    local_layers: tuple[bool, ...] | None = None
    hf_names: tuple[tuple[str, str], ...] = dataclasses.field(default=(), compare=False)
    """(our field, the HF config's name for it) where they differ (``n_embd``...): errors name the user's field."""

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def max_positions(self) -> int:
        return self.max_position_embeddings


GPT2_NAMES = (
    ("hidden_size", "n_embd"),
    ("intermediate_size", "n_inner"),
    ("num_hidden_layers", "n_layer"),
    ("num_attention_heads", "n_head"),
    ("max_position_embeddings", "n_positions"),
)
"""Our fields -> their names in GPT-2-style HF configs (GPT-2, GPT-J)."""


def gpt2_style_config(hf_config: Mapping[str, Any], model_type: str, *, tie_default: bool, **fields) -> GPTLikeConfig:
    """A GPTLikeConfig of the fields GPT-2-style HF configs name alike (``n_embd``, ``n_layer``, ``n_head``,
    ``n_positions``, ``n_inner`` (default 4 × ``n_embd``), ``layer_norm_epsilon``, ``activation_function``)
    and the family's own ``fields``. KeyError for a missing required field (``layers.required_fields``)."""
    d_model = int(hf_config["n_embd"])
    return GPTLikeConfig(
        model_type=model_type,
        hf_names=GPT2_NAMES,
        vocab_size=int(hf_config["vocab_size"]),
        hidden_size=d_model,
        intermediate_size=int(hf_config.get("n_inner") or 4 * d_model),
        num_hidden_layers=int(hf_config["n_layer"]),
        num_attention_heads=int(hf_config["n_head"]),
        max_position_embeddings=int(hf_config["n_positions"]),
        layer_norm_eps=float(hf_config.get("layer_norm_epsilon", 1e-5)),
        activation=check_activation(hf_config.get("activation_function", "gelu_new"), "activation_function"),
        tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", tie_default)),
        **fields,
    )


class GPTLikeBlock(CausalBlock):
    """One decoder layer from a GPT-like config; ``lead`` stacks the layers' parameters."""

    def __init__(self, config: GPTLikeConfig, *, lead: tuple[int, ...] = ()):
        c = config
        D, H, eps = c.hidden_size, c.num_attention_heads, c.layer_norm_eps
        self.attn_norm = LayerNorm(D, eps, bias=c.norm_bias, lead=lead)
        self.attn = Attention(
            D,
            H,
            H,
            c.head_dim,
            eps=eps,
            qkv_bias=c.qkv_bias,
            o_bias=c.o_bias,
            clip=c.clip_qkv,
            scale=c.attn_scale,
            f32_scores=c.f32_scores,
            rotary=None if c.positions != "rotary" else ("pairs" if c.rotary_pairs else "half"),
            lead=lead,
        )
        if not c.shared_norm:
            self.mlp_norm = LayerNorm(D, eps, bias=c.norm_bias, lead=lead)
        self.mlp = MLP(D, c.intermediate_size, activation=c.activation, bias=c.mlp_bias, lead=lead)
        self.residual = c.residual

    def project(self, x, rope, tap=None):
        """Queries, keys (rotated with rotary positions) and values of the (normalised) layer input (the site
        ``attn.in``)."""
        return self.attn.project(
            tap_site(tap, "attn.in", x if self.residual == "post" else self.attn_norm(x)), rope, tap
        )

    def attend(self, x, q, k, v, allowed, bias=None, tap=None):
        """The layer output from the queries' attention over the given keys and values (see the module doc);
        sites ``attn.out``, ``resid_mid``, ``mlp.in``, ``mlp.out`` of ``tap`` (:mod:`jaxassoc.models.sites`:
        parallel blocks' MLP reads ``resid_pre``, so ``resid_post = resid_mid + mlp.out``)."""
        attended = tap_site(tap, "attn.out", self.attn.attend(q, k, v, allowed, bias, tap))
        if self.residual == "post":
            x = tap_site(tap, "resid_mid", self.attn_norm(x + attended))
            return self.mlp_norm(x + tap_site(tap, "mlp.out", self.mlp(tap_site(tap, "mlp.in", x), tap)))
        if self.residual == "parallel":
            mid = tap_site(tap, "resid_mid", x + attended)
            inner = tap_site(tap, "mlp.in", getattr(self, "mlp_norm", self.attn_norm)(x))
            return mid + tap_site(tap, "mlp.out", self.mlp(inner, tap))
        x = tap_site(tap, "resid_mid", x + attended)
        return x + tap_site(tap, "mlp.out", self.mlp(tap_site(tap, "mlp.in", self.mlp_norm(x)), tap))


class GPTLike(CausalBody):
    """The GPT-like body: ``embed`` (plus learned ``positions``), the stacked ``layers`` (:class:`GPTLikeBlock`,
    local ones windowed), ``final_norm``; rotary tables or ALiBi from position ids."""

    def __init__(self, config: GPTLikeConfig):
        c = config
        D, E = c.hidden_size, c.word_embed_dim or c.hidden_size
        self.embed = zeros(c.vocab_size, E, axes=("vocab", "embed"))
        if c.positions == "learned":
            self.positions = zeros(c.max_position_embeddings + c.position_offset, D, axes=(None, "embed"))
        if E != D:
            self.project_in = Linear(E, D, axes=(None, "embed"))
            self.project_out = Linear(D, E, axes=("embed", None))
        self.layers = GPTLikeBlock(config, lead=(c.num_hidden_layers,))
        if c.final_norm:
            self.final_norm = LayerNorm(D, c.layer_norm_eps, bias=c.norm_bias)
        self.n_layers = c.num_hidden_layers
        self.local_layers = c.local_layers
        self.window = c.sliding_window if c.local_layers is None or any(c.local_layers) else None
        self.config = config

    def embed_inputs(self, input_ids, positions):
        x = super().embed_inputs(input_ids, positions)
        if hasattr(self, "project_in"):
            x = self.project_in(x)
        if self.config.positions == "learned":
            x = x + jnp.take(self.positions[...], positions + self.config.position_offset, axis=0)
        return x

    def head_input(self, h):
        if self.config.final_norm:
            h = self.final_norm(h)
        return self.project_out(h) if hasattr(self, "project_out") else h

    def block_positions(self, positions, dtype):
        c = self.config
        if c.positions != "rotary":
            return None
        return rope_tables(positions, c.rotary_dim, c.rope_theta, dtype, pairs=c.rotary_pairs)

    def attention_bias(self, query_positions, key_positions):
        """ALiBi (Press et al. 2022, sec. 3) on position ids: ``slope_h * (key position - the row's last key
        position)``, ``(B, H, 1, T)``. It differs from ``slope_h * (key - query position)`` by a constant per
        query, which the softmax ignores, and stays within transformers' range ``[-slope_h * T, 0]``."""
        if self.config.positions != "alibi":
            return None
        slopes = jnp.asarray(alibi_slopes(self.config.num_attention_heads, self.config.alibi_bias_max))
        distance = (key_positions - key_positions.max(axis=1, keepdims=True)).astype(jnp.float32)
        return slopes[None, :, None, None] * distance[:, None, None, :]


def alibi_slopes(n_heads: int, bias_max: int) -> np.ndarray:
    """The per-head ALiBi slopes ``(n_heads,)`` as MPT builds them (float32, transformers' order): ``2^(-i *
    bias_max / n)`` for n the head count rounded up to a power of two, interleaved when it is not one."""
    n = 2 ** math.ceil(math.log2(n_heads))
    slopes = 1.0 / np.power(np.float32(2), np.arange(1, n + 1, dtype=np.float32) * np.float32(bias_max / n))
    if n != n_heads:
        slopes = np.concatenate([slopes[1::2], slopes[::2]])[:n_heads]
    return slopes.astype(np.float32)


def new_body(config: GPTLikeConfig, body: Mapping | None = None) -> GPTLike:
    """The body module (zero parameters); its structure follows the config alone."""
    return GPTLike(config)


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a GPT-like family's checkpoint keeps each of our parameters: Hugging Face module names."""

    name: str  # the family as messages name it
    prefixes: tuple[str, ...]  # model prefixes to strip ("transformer.", ...)
    layer: str  # a layer's HF module, "{}" its index
    modules: Mapping[str, str]  # our sub-module in a layer ("attn_norm", "attn.o", "mlp.up") -> its HF module
    embed: str
    final_norm: str | None = None
    positions: str | None = None  # the learned position table's HF module
    fused_qkv: str | None = None  # a fused query/key/value projection's HF module in a layer
    qkv_per_head: bool = False  # its output columns are [q_h, k_h, v_h] per head (GPT-NeoX), else [q | k | v]
    conv1d: bool = False  # weights stored (in, out) (GPT-2's Conv1D), else nn.Linear's (out, in)
    heads: tuple[str, ...] = ("lm_head",)  # the output head's HF module (the first the checkpoint has)
    buffers: tuple[str, ...] = ()  # HF names in a layer holding no weights (old causal-mask buffers)
    project: tuple[str, str] | None = None  # OPT's (project_in, project_out) HF modules


def params_from_hf(tensors: Mapping[str, np.ndarray], config: GPTLikeConfig, *, layout: Layout) -> dict[str, Any]:
    """``{"body", "head"}`` from Hugging Face tensors laid out as ``layout`` says, each layer's stacked on a
    leading axis, fused q/k/v projections split, weights as ``(in, out)``; the head is a separate copy even
    for tied checkpoints. One ModelError names every missing, unexpected or misshapen tensor."""
    shapes = param_shapes(nnx.eval_shape(lambda: new_body(config)))
    n, lay = config.num_hidden_layers, layout
    buffers = tuple(f"{lay.layer.format(i)}.{b}" for i in range(n) for b in lay.buffers)
    t = TensorTaker(tensors, prefixes=lay.prefixes, ignore=buffers, outside=tuple(f"{h}." for h in lay.heads))
    body: dict[str, Any] = {"embed": t.take(f"{lay.embed}.weight", shapes["embed"])}
    if lay.positions:
        body["positions"] = t.take(f"{lay.positions}.weight", shapes["positions"])
    layer_shapes = shapes["layers"]
    layers: dict[str, Any] = {name: {} for name in layer_shapes}
    for ours, hf in lay.modules.items():
        parent, _, child = ours.rpartition(".")
        leaves = layer_shapes[parent][child] if parent else layer_shapes[child]
        (layers[parent] if parent else layers)[child] = t.stacked(f"{lay.layer}.{hf}", n, leaves, conv1d=lay.conv1d)
    if lay.fused_qkv:
        layers["attn"].update(_split_qkv(t, lay, config, layer_shapes["attn"]))
    body["layers"] = layers
    if "project_in" in shapes:
        body["project_in"] = t.module(lay.project[0], shapes["project_in"])
        body["project_out"] = t.module(lay.project[1], shapes["project_out"])
    if "final_norm" in shapes:
        body["final_norm"] = t.module(lay.final_norm, shapes["final_norm"])
    W = t.head(body["embed"], config.tie_word_embeddings, tuple(f"{h}.weight" for h in lay.heads))
    b = t.take(f"{lay.heads[0]}.bias", shapes["embed"][:1]) if config.head_bias else None
    t.finish(lay.name)
    return {"body": body, "head": Head(W=W, b=b)}


def _split_qkv(t: TensorTaker, layout: Layout, config: GPTLikeConfig, shapes: Mapping) -> dict[str, Any]:
    """q, k and v of each layer's fused projection (views, but GPT-NeoX's per-head layout is copied)."""
    D, H = config.hidden_size, config.num_attention_heads
    parts: dict[str, dict[str, list]] = {name: {} for name in "qkv"}
    for i in range(config.num_hidden_layers):
        name = f"{layout.layer.format(i)}.{layout.fused_qkv}"
        for leaf in shapes["q"]:  # "w" and, with qkv_bias, "b"
            shape = (D, 3 * D) if leaf == "w" else (3 * D,)
            fused = t.take(
                f"{name}.{'weight' if leaf == 'w' else 'bias'}", shape, transpose=leaf == "w" and not layout.conv1d
            )
            if layout.qkv_per_head:
                per_head = fused.reshape(*shape[:-1], H, 3, D // H)
                split = [np.ascontiguousarray(per_head[..., j, :]).reshape(*shape[:-1], D) for j in range(3)]
            else:
                split = [fused[..., j * D : (j + 1) * D] for j in range(3)]
            for name_, part in zip("qkv", split):
                parts[name_].setdefault(leaf, []).append(part)
    return {name: {leaf: LayerStack(layers) for leaf, layers in leaves.items()} for name, leaves in parts.items()}


def family(name: str, config_from_hf: Callable[[dict], GPTLikeConfig], layout: Layout) -> Family:
    """The Family of a GPT-like member: its config reader and checkpoint layout; the rest is this decoder's."""
    return Family(
        name=name,
        model_types={name: name},
        objective="causal",
        config_from_hf=config_from_hf,
        params_from_hf=functools.partial(params_from_hf, layout=layout),
        new_body=new_body,
    )
