"""Pieces shared by the Flax NNX ports: norms, rotary embeddings, the attention function, masks and
position ids, the key/value cache, and the causal decoder body with its cached-forward step.

Every port is an ``nnx.Module`` tree whose attribute names are the keys of its parameter pytree, so the
NNX state of a body as a pure dict *is* ``params["body"]`` (``nnx.merge(graphdef, body)`` rebuilds the
module from it). Per-layer parameters are stacked on a leading axis: a family's block module is built
once with that axis on every parameter (``lead=(n_layers,)``) and :func:`scan_layers` runs it under
``jax.lax.scan`` over its split state (``nnx.split`` outside the scan, ``nnx.merge`` of one layer's slice
per step), so a model compiles one block whatever its depth. Parameters are created as zeros: a port is
filled by loading a checkpoint (``load_model``), and its shapes come from ``nnx.eval_shape``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Callable, Iterator, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.sites import SiteOps, Tap, tap_site

Axes = tuple[str | None, ...]
"""Logical axes of one parameter, one per dimension (``mesh.RULES`` maps them onto the mesh), e.g.
``("layers", "embed", "heads")``; None: never sharded."""


def zeros(*shape: int, axes: Axes, heads: int | None = None, lead: tuple[int, ...] = ()) -> nnx.Param:
    """A float32 parameter of ``lead + shape`` (its values come from a checkpoint) carrying its logical ``axes``
    (``nnx.Param`` metadata ``out_sharding``, read by ``nnx.get_partition_spec``); ``lead`` stacks several
    layers (their axis ``"layers"``, an expert axis after it unsharded). ``heads``: how many heads its
    ``heads`` / ``kv_heads`` dimension holds (a head is never split over devices)."""
    full = (*lead_axes(lead), *axes)
    if len(full) != len(lead) + len(shape):
        raise ModelError(f"a parameter of shape {(*lead, *shape)} was given {len(full)} logical axes {full}")
    metadata = {} if heads is None else {"heads": heads}
    return nnx.Param(jnp.zeros((*lead, *shape), jnp.float32), out_sharding=full, eager_sharding=False, **metadata)


HEAD_AXES = ("heads", "kv_heads")
"""The logical axes that hold whole heads."""


def lead_axes(lead: tuple[int, ...]) -> Axes:
    """The logical axes of stacked dimensions: the layers', then unsharded ones (a mixture's experts)."""
    return ("layers", *(None,) * (len(lead) - 1)) if lead else ()


def layer_norm(x: Float[Array, "... D"], eps: float, scale: Array | None = None, bias: Array | None = None) -> Array:
    """LayerNorm in float32 with an optional scale and bias (None: left out; MPT has no bias, OLMo neither)."""
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    y = (x32 - mean) * jax.lax.rsqrt(jnp.square(x32 - mean).mean(-1, keepdims=True) + eps)
    if scale is not None:
        y = y * scale.astype(jnp.float32)
    if bias is not None:
        y = y + bias.astype(jnp.float32)
    return y.astype(x.dtype)


def rms_norm(x: Float[Array, "... D"], weight: Float[Array, " D"], eps: float) -> Float[Array, "... D"]:
    """RMSNorm (Zhang & Sennrich 2019, eq. 4), computed in float32 as in Llama."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight * normed.astype(x.dtype)


def gelu_tanh(x: Array) -> Array:
    """GPT-2's ``gelu_new``: the tanh approximation of GELU (Hendrycks & Gimpel 2016)."""
    return jax.nn.gelu(x, approximate=True)


def gelu_erf(x: Array) -> Array:
    """The exact (erf) GELU used by BERT and RoBERTa."""
    return jax.nn.gelu(x, approximate=False)


ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "gelu": gelu_erf,
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "relu": jax.nn.relu,
}


def check_activation(name: str, field: str) -> str:
    """Return ``name`` if it is a handled activation, else raise ModelError naming the config field."""
    if name not in ACTIVATIONS:
        raise ModelError(
            f"config field {field}={name!r} is not supported; supported activations: {sorted(ACTIVATIONS)}"
        )
    return name


@contextlib.contextmanager
def required_fields(family: str) -> Iterator[None]:
    """Turn a KeyError while reading a HF config into a ModelError naming the missing field."""
    try:
        yield
    except KeyError as e:
        raise ModelError(f"the {family} config.json lacks the required field {e.args[0]!r}") from None


def unscaled_rope_theta(hf_config: dict, port: str, default: float = 10000.0) -> float:
    """``rope_theta`` of a transformers 4 (``rope_theta`` / ``rope_scaling``) or 5 (``rope_parameters``)
    config (``default`` when it has none: the HF config class's ``default_theta``); ModelError naming the
    rope type unless it is unscaled (``default``)."""
    params = hf_config.get("rope_parameters") or {}
    scaling = hf_config.get("rope_scaling")
    rope_type = params.get("rope_type", "default")
    if scaling is not None:
        rope_type = scaling.get("rope_type", scaling.get("type"))
    if rope_type != "default":
        raise ModelError(
            f"config field rope_scaling / rope_parameters: rope_type = {rope_type!r} is not supported by the "
            f"{port} port; only unscaled rotary embeddings (rope_type 'default') are"
        )
    return float(params.get("rope_theta", hf_config.get("rope_theta", default)))


SCALED_ROPE_TYPES = ("linear", "dynamic", "llama3")
"""The rotary rescalings :func:`rope_frequencies` implements (HF ``rope_type``; "default" is unscaled)."""


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """A rescaling of the rotary frequencies as a HF config's ``rope_parameters`` / ``rope_scaling`` gives it
    (:func:`rope_scaling_from_hf`); the ``llama3`` fields are unused by the other types."""

    rope_type: str
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


def rope_scaling_from_hf(hf_config: Mapping, family: str) -> tuple[float, RopeScaling | None]:
    """``(rope_theta, scaling)`` from a transformers 4 (``rope_theta``, ``rope_scaling``) or 5
    (``rope_parameters``) config; scaling is None for unscaled ("default") rotary embeddings. ModelError
    naming the rope type for one :func:`rope_frequencies` does not implement (yarn, longrope, ...) and
    naming a missing scaling field."""
    params = hf_config.get("rope_parameters") or {}
    scaling = hf_config.get("rope_scaling") or params
    rope_type = scaling.get("rope_type") or scaling.get("type") or "default"
    theta = float(params.get("rope_theta", hf_config.get("rope_theta", 10000.0)))
    if rope_type == "default":
        return theta, None
    if rope_type not in SCALED_ROPE_TYPES:
        raise ModelError(
            f"{family} config: rope scaling rope_type = {rope_type!r} is not supported: only unscaled rotary "
            f"embeddings ('default') and {list(SCALED_ROPE_TYPES)} are"
        )
    required = ("factor", "low_freq_factor", "high_freq_factor") if rope_type == "llama3" else ("factor",)
    missing = [key for key in required if scaling.get(key) is None]
    if missing:
        raise ModelError(f"{family} config: rope scaling {rope_type!r} lacks the field(s) {missing}")
    fields = {key: float(scaling[key]) for key in required}
    if rope_type == "llama3":  # HF: the pretraining context defaults to max_position_embeddings
        original = scaling.get("original_max_position_embeddings") or hf_config.get("max_position_embeddings")
        fields["original_max_position_embeddings"] = int(original)
    return theta, RopeScaling(rope_type, **fields)


def rope_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None = None) -> np.ndarray:
    """The rotary inverse frequencies ``theta^(-2i/d)``, ``i < d/2`` (Su et al. 2021, eq. 34), float32, as
    rescaled by ``scaling`` (``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``; none of these types
    scales cos/sin):

    - ``linear`` (position interpolation, Chen et al. 2023): every frequency divided by ``factor``;
    - ``dynamic`` (NTK-aware): ``theta`` becomes ``theta * (factor * n / L - (factor - 1))^(d / (d - 2))``
      for a sequence of ``n > L = max_position_embeddings`` tokens; inputs never exceed ``L`` here
      (longer ones are refused), so ``n = L`` and the frequencies are HF's at that length, i.e. unscaled;
    - ``llama3`` (Llama 3.1): wavelengths ``2 pi / f`` above ``original / low_freq_factor`` divided by
      ``factor``, below ``original / high_freq_factor`` kept, in between interpolated with
      ``s = (original / wavelength - low) / (high - low)``: ``(1 - s) f / factor + s f``.
    """
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / np.float32(head_dim)
    kind = "default" if scaling is None else scaling.rope_type
    if kind == "dynamic":
        theta = theta * (scaling.factor - (scaling.factor - 1)) ** (head_dim / (head_dim - 2))
    inv_freq = (1.0 / np.power(np.float32(theta), exponents)).astype(np.float32)
    if kind == "linear":
        return (inv_freq / np.float32(scaling.factor)).astype(np.float32)
    if kind == "llama3":
        s = scaling
        factor = np.float32(s.factor)
        low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
        high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
        wavelen = (np.float32(2 * math.pi) / inv_freq).astype(np.float32)
        scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq).astype(np.float32)
        smooth = (
            (s.original_max_position_embeddings / wavelen - s.low_freq_factor)
            / (s.high_freq_factor - s.low_freq_factor)
        ).astype(np.float32)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return np.where(medium, smoothed, scaled).astype(np.float32)
    return inv_freq


def rope_tables(
    positions: Int[Array, "B T"],
    rotary_dim: int,
    theta: float,
    dtype,
    scaling: RopeScaling | None = None,
    *,
    pairs: bool = False,
) -> tuple[Array, Array]:
    """cos and sin ``(B, T, rotary_dim)`` of the rotary angles ``pos * f_i`` (:func:`rope_frequencies` of
    ``rotary_dim``, ``theta`` and ``scaling``): in the "rotate half" layout (the angles, then again), or with
    ``pairs`` each angle twice in a row for the interleaved pair it turns (GPT-J)."""
    inv_freq = jnp.asarray(rope_frequencies(rotary_dim, theta, scaling))
    angles = positions.astype(jnp.float32)[..., None] * inv_freq
    angles = jnp.repeat(angles, 2, axis=-1) if pairs else jnp.concatenate([angles, angles], axis=-1)
    return jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)


def apply_rope(
    x: Float[Array, "B T H d"], cos: Float[Array, "B T r"], sin: Float[Array, "B T r"], *, pairs: bool = False
) -> Float[Array, "B T H d"]:
    """Rotate the first ``r`` dimensions of each head by its position's angles (Su et al. 2021, eq. 34) and keep
    the rest (partial rotary: GPT-NeoX, GPT-J): the HF "rotate half" layout (dimension ``i`` turns with ``i +
    r/2``), or with ``pairs`` the interleaved one (dimensions ``2i`` and ``2i + 1``, GPT-J)."""
    r = cos.shape[-1]
    rot = x[..., :r]
    if pairs:
        turned = jnp.stack([-rot[..., 1::2], rot[..., ::2]], axis=-1).reshape(rot.shape)
    else:
        turned = jnp.concatenate([-rot[..., r // 2 :], rot[..., : r // 2]], axis=-1)
    rotated = rot * cos[:, :, None, :] + turned * sin[:, :, None, :]
    return rotated if r == x.shape[-1] else jnp.concatenate([rotated, x[..., r:]], axis=-1)


def positions_from_mask(attention_mask: Int[Array, "B T"]) -> Int[Array, "B T"]:
    """Position of each real token counted from the start of its sequence (left or right padding).

    The mask is 0 for padding and otherwise a segment id: a plain 0/1 mask holds one sequence per row,
    and a *packed* row holds several contiguous sequences with distinct ids (e.g. ``1 1 1 2 2 0``), each
    counted from 0. Padding positions get the position of the nearest real token before them (0 before
    the first), so they never index past the position table.
    """
    real = attention_mask > 0
    count = jnp.cumsum(real, axis=1)  # real tokens up to and including t
    previous = jnp.pad(attention_mask[:, :-1], ((0, 0), (1, 0)))
    starts = real & (attention_mask != previous)  # first token of a segment
    before = jax.lax.cummax(jnp.where(starts, count - 1, 0), axis=1)  # real tokens before t's segment
    return jnp.maximum(count - 1 - before, 0)


def segment_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B T T"]:
    """Keys (last axis) a query (middle axis) may see, ignoring order: real keys of its own segment.

    A padding query sees every real key, so its (unused) output stays finite. For a 0/1 mask this is
    "every real key", the usual padding mask.
    """
    real_key = (attention_mask > 0)[:, None, :]
    same = attention_mask[:, :, None] == attention_mask[:, None, :]
    padding_query = (attention_mask == 0)[:, :, None]
    return real_key & (same | padding_query)


def padding_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B 1 1 T"]:
    """Keys a query may attend to in a bidirectional encoder: every real token."""
    return attention_mask.astype(bool)[:, None, None, :]


def causal_allowed(attention_mask: Int[Array, "B T"]) -> Bool[Array, "B 1 T T"]:
    """Keys a query may attend to in a causal decoder: real tokens of its segment at or before it (a sliding
    window is applied on position ids by :func:`window_allowed`)."""
    T = attention_mask.shape[1]
    allowed = jnp.arange(T)[None, :] <= jnp.arange(T)[:, None]
    return (allowed[None] & segment_allowed(attention_mask))[:, None]


def attention(
    q: Float[Array, "B T H K"],
    k: Float[Array, "B S G K"],
    v: Float[Array, "B S G K"],
    allowed: Bool[Array, "B 1 T S"],
    scale: float,
    *,
    bias: Float[Array, "B H T S"] | None = None,
    softcap: float | None = None,
    tap: Tap | None = None,
) -> Float[Array, "B T H K"]:
    """Scaled dot-product attention (Vaswani et al. 2017, eq. 1) with grouped-query heads (Ainslie et al.
    2023: the H query heads share G key/value heads, H a multiple of G); softmax in float32.

    ``allowed[b, 0, t, s]`` says whether query t may see key s (causal, segment, window and padding masks
    are all such arrays). Disallowed scores are set to the float32 minimum (not -inf), as in HF, so a query
    row with no allowed key (a padding row) gives finite values instead of NaN. ``bias`` (broadcastable to
    ``(B, H, T, S)``, e.g. ALiBi's) is added to the scaled scores; ``softcap`` then caps them smoothly,
    ``c * tanh(scores / c)`` (Gemma 2). The weights are the site ``attn.pattern`` of ``tap``.
    """
    B, T, H, K = q.shape
    G = k.shape[2]
    grouped = q.reshape(B, T, G, H // G, K)
    scores = jnp.einsum("btgnk,bsgk->bgnts", grouped, k).astype(jnp.float32) * scale
    if bias is not None:
        bias = jnp.broadcast_to(bias, (B, H, T, scores.shape[-1])).reshape(B, G, H // G, T, -1)
        scores = scores + bias.astype(jnp.float32)
    if softcap is not None:
        scores = softcap * jnp.tanh(scores / softcap)
    scores = jnp.where(allowed[:, :, None], scores, jnp.finfo(jnp.float32).min)
    weights = tapped_pattern(tap, "attn.pattern", jax.nn.softmax(scores, axis=-1), G).astype(v.dtype)
    return jnp.einsum("bgnts,bsgk->btgnk", weights, v).reshape(B, T, H, K)


def tapped_pattern(tap: Tap | None, kind: str, weights: Float[Array, "B G n T S"], groups: int) -> Array:
    """``weights`` (grouped heads) as ``tap`` leaves the site ``kind`` (``(B, T, H, S)``, query by key), or
    untouched (no transposes traced) when the run neither reads nor edits it."""
    if tap is None or not tap.wants(kind):
        return weights
    B, G, n, T, S = weights.shape
    pattern = tap(kind, weights.transpose(0, 3, 1, 2, 4).reshape(B, T, G * n, S))
    return pattern.reshape(B, T, G, n, S).transpose(0, 2, 3, 1, 4)


def window_allowed(
    allowed: Bool[Array, "B 1 t T"], query_positions: Int[Array, "B t"], key_positions: Int[Array, "B T"], window: int
) -> Bool[Array, "B 1 t T"]:
    """``allowed`` restricted to a sliding window on position ids: a query sees itself and the ``window - 1``
    positions before it (Mistral; the local layers of GPT-Neo, Gemma 2/3, Qwen2)."""
    return allowed & (key_positions[:, None, None, :] > query_positions[:, None, :, None] - window)


def split_heads(x: Float[Array, "B T D"], n_heads: int) -> Float[Array, "B T H K"]:
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads)


def merge_heads(x: Float[Array, "B T H K"]) -> Float[Array, "B T D"]:
    B, T, H, K = x.shape
    return x.reshape(B, T, H * K)


def head_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


def scan_layers(stack: nnx.Module, step: Callable, carry: Any, xs: Any = None) -> tuple[Any, Any]:
    """``jax.lax.scan`` of ``step(layer, carry, x) -> (carry, y)`` over the layers of a stacked module:
    its state is split once, and each step merges its layer's slice into a one-layer module."""
    graphdef, state = nnx.split(stack)

    def body(carry, sliced):
        layer_state, x = sliced
        return step(nnx.merge(graphdef, layer_state), carry, x)

    return jax.lax.scan(body, carry, (state, xs))


def scan_blocks(
    stack: nnx.Module, run_block: Callable, h: Array, xs: Any, *, sites: SiteOps | None, keep: bool
) -> tuple[Array, Array | None, dict | None]:
    """:func:`scan_layers` of ``run_block(block, h, x, tap) -> h`` with the named sites of each layer
    (``resid_pre``, the block's own, ``resid_post``) read and edited through ``sites``: ``(h, every layer's
    output if keep, the stacked per-layer records)``."""

    def step(block, h, inputs):
        x, index, stacked = inputs
        tap = None if sites is None else sites.tap(index, stacked)

        def run(h):
            return tap_site(tap, "resid_post", run_block(block, tap_site(tap, "resid_pre", h), x, tap))

        if sites is not None and sites.start is not None:  # resumed: the layers before start do not run
            out = jax.lax.cond(index >= sites.start[0], run, lambda h: h, h)
        else:
            out = run(h)
        return out, (out if keep else None, None if tap is None else tap.records)

    n_layers = jax.tree.leaves(nnx.state(stack))[0].shape[0]
    stacked = {} if sites is None else sites.stacked
    h, (per_layer, records) = scan_layers(stack, step, h, (xs, jnp.arange(n_layers), stacked))
    return h, per_layer, records


def finish_sites(sites: SiteOps | None, hidden: Array, records: dict | None) -> tuple[Array, dict | None]:
    """The head input after the ``final_norm`` site's edit, and every requested read by name."""
    if sites is None:
        return hidden, None
    model_records: dict = {}
    hidden = sites.model_site("final_norm", hidden, model_records)
    return hidden, sites.collect(records, model_records)


class KVCache(NamedTuple):
    """Keys and values of every layer for ``T`` columns: each ``(layers, B, T, key/value heads, head_dim)``."""

    k: Float[Array, "L B T H K"]
    v: Float[Array, "L B T H K"]


def write_columns(k_all: Array, v_all: Array, k: Array, v: Array, start) -> tuple[Array, Array]:
    """One layer's cached keys/values ``(B, T, H, K)`` with the new tokens' written at columns ``start...``."""
    k_all = jax.lax.dynamic_update_slice_in_dim(k_all, k.astype(k_all.dtype), start, axis=1)
    v_all = jax.lax.dynamic_update_slice_in_dim(v_all, v.astype(v_all.dtype), start, axis=1)
    return k_all, v_all


@dataclasses.dataclass(frozen=True)
class DecoderSizes:
    """The sizes every decoder builder's config starts with (``llama_like.LlamaLikeConfig``,
    ``gpt_like.GPTLikeConfig``); frozen and hashable, a static argument under jit."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int


class CausalBlock(nnx.Module):
    """A decoder layer with sub-modules ``attn`` (:class:`~jaxassoc.models.attention.Attention`) and ``mlp``
    and its norms, split where the key/value cache sits. A builder's block defines ``project(h, positions)``
    (queries, keys and values of its input; ``positions`` is what the body's ``layer_positions`` gives) and
    ``attend(h, q, k, v, allowed, bias=None)`` (the layer output from those queries over the (cached) keys
    and values; ``bias`` the body's ``attention_bias``): ``llama_like.LlamaLikeBlock``,
    ``gpt_like.GPTLikeBlock``."""

    def __call__(self, h, positions, allowed, bias=None, tap=None):
        return self.attend(h, *self.project(h, positions, tap), allowed, bias, tap)


class CausalBody(nnx.Module):
    """A causal decoder body holding, by these names, the token embeddings ``embed``, the ``n_layers`` layers
    ``layers`` (one :class:`CausalBlock` whose parameters are stacked on a leading axis, scanned) and
    ``final_norm``. Subclasses build them and may set ``window`` (a sliding window on position ids) with
    ``local_layers`` (which layers use it; None: all) and override ``embed_inputs``, ``head_input``,
    ``block_positions`` / ``layer_positions`` (rotary tables) and ``attention_bias`` (ALiBi)."""

    n_layers: int
    window: int | None = None
    local_layers: tuple[bool, ...] | None = None

    @property
    def cache_dims(self) -> tuple[int, int, int]:
        """(layers, key/value heads, head dim) of the key/value cache."""
        return self.n_layers, self.layers.attn.kv_heads, self.layers.attn.head_dim

    def embed_inputs(self, input_ids: Int[Array, "B T"], positions: Int[Array, "B T"]) -> Float[Array, "B T D"]:
        """The layers' input: the token embeddings (learned-position families add theirs). Indexing clamps an
        id past the table (a padding id, ``vocab_size``) to the last row: finite, where ``jnp.take`` gives NaN."""
        return self.embed[...][input_ids]

    def head_input(self, h: Float[Array, "B T D"]) -> Float[Array, "B T D"]:
        """The last layer's output as the head reads it: after ``final_norm``."""
        return self.final_norm(h)

    def block_positions(self, positions: Int[Array, "B T"], dtype) -> Any:
        """What the blocks need of the position ids (computed once, outside the layer scan): the ids
        themselves by default; rotary ports override it with their cos/sin tables."""
        return positions

    def layer_positions(self, at: Any, local: Bool[Array, ""]) -> Any:
        """One layer's share of ``block_positions`` (``local``: whether the layer is a windowed one); e.g.
        Gemma 3 gives its local layers other rotary tables. Default: ``at`` itself."""
        return at

    def attention_bias(self, query_positions: Int[Array, "B t"], key_positions: Int[Array, "B T"]) -> Array | None:
        """An additive attention bias broadcastable to ``(B, heads, t, T)`` from position ids (ALiBi), or None."""
        return None

    def _layer_masks(self, allowed, query_positions, key_positions):
        """(global, local or None, per-layer flags ``(L,)``): what each layer of the scan attends with."""
        n_layers = self.n_layers
        if self.window is None:
            return allowed, None, jnp.zeros(n_layers, bool)
        local = window_allowed(allowed, query_positions, key_positions, self.window)
        flags = (True,) * n_layers if self.local_layers is None else self.local_layers
        return allowed, local, jnp.asarray(flags, bool)

    def __call__(
        self,
        input_ids: Int[Array, "B T"],
        attention_mask: Int[Array, "B T"],
        *,
        all_layers: bool = False,
        sites: SiteOps | None = None,
    ) -> ForwardOutput:
        """Final hidden states after the final norm (the head input), and optionally HF's
        ``hidden_states``: the embeddings, then each block's output, the last one after the final norm
        (so ``layers[-1] == hidden``). ``sites``: the named sites to read and edit on the way
        (:mod:`jaxassoc.models.sites`); what was read is ``ForwardOutput.sites``."""
        positions = positions_from_mask(attention_mask)
        if sites is not None and sites.start is not None:
            x = sites.start[1]
        else:
            x = self.embed_inputs(input_ids, positions)
        allowed, local, flags = self._layer_masks(causal_allowed(attention_mask), positions, positions)
        bias = self.attention_bias(positions, positions)
        at = self.block_positions(positions, x.dtype)

        def run_block(block, h, flag, tap):
            mask = allowed if local is None else jnp.where(flag, local, allowed)
            return block(h, self.layer_positions(at, flag), mask, bias, tap)

        h, per_layer, records = scan_blocks(self.layers, run_block, x, flags, sites=sites, keep=all_layers)
        hidden, read = finish_sites(sites, self.head_input(h), records)
        if not all_layers:
            return ForwardOutput(hidden=hidden, layers=None, sites=read)
        layers = (x, *(per_layer[i] for i in range(per_layer.shape[0] - 1)), hidden)
        return ForwardOutput(hidden=hidden, layers=layers, sites=read)

    def init_cache(self, batch: int, length: int, dtype=jnp.float32) -> KVCache:
        """An empty cache for ``batch`` rows of ``length`` columns (prompt + new tokens)."""
        layers, heads, head_dim = self.cache_dims
        shape = (layers, batch, length, heads, head_dim)
        return KVCache(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype))

    def forward_cached(
        self,
        input_ids: Int[Array, "B t"],
        attention_mask: Int[Array, "B T"],
        cache: KVCache,
        start: Int[Array, ""],
        *,
        positions: Int[Array, "B t"] | None = None,
        allowed: Bool[Array, "B 1 t T"] | None = None,
        sites: SiteOps | None = None,
    ) -> tuple[Float[Array, "B t D"], KVCache]:
        """Hidden states (after the final norm) of the tokens at columns ``[start, start + t)`` of rows
        described by the full-length mask, reading earlier columns' keys/values from ``cache`` and writing
        these tokens' into it.

        ``positions`` (their position ids) and ``allowed`` (which of the T cache columns each new token may
        see) default to what the mask gives (:func:`positions_from_mask`, :func:`causal_allowed`); pass
        them to lay out the columns otherwise, e.g. several continuations of one cached prefix side by side
        (block-causal ``allowed``, positions restarting after the prefix). Sliding windows and attention
        biases act on position ids: the cache columns' are the mask's with the new tokens' ``positions``
        written at ``start``. A prompt pass (``start = 0``) followed by one-token steps gives the same
        states as the full forward (tested). ``sites``: edits applied at each step (reads are not kept).
        """
        t = input_ids.shape[1]
        mask_positions = positions_from_mask(attention_mask)
        if positions is None:
            positions = jax.lax.dynamic_slice_in_dim(mask_positions, start, t, axis=1)
        if allowed is None:
            allowed = jax.lax.dynamic_slice_in_dim(causal_allowed(attention_mask), start, t, axis=2)
        keys = jax.lax.dynamic_update_slice_in_dim(
            mask_positions, positions.astype(mask_positions.dtype), start, axis=1
        )
        allowed, local, flags = self._layer_masks(allowed, positions, keys)
        bias = self.attention_bias(positions, keys)
        x = self.embed_inputs(input_ids, positions)
        at = self.block_positions(positions, x.dtype)

        def step(block, h, xs):
            flag, k_all, v_all, index, stacked = xs
            tap = None if sites is None else sites.tap(index, stacked)
            h = tap_site(tap, "resid_pre", h)
            mask = allowed if local is None else jnp.where(flag, local, allowed)
            q, k, v = block.project(h, self.layer_positions(at, flag), tap)
            k_all, v_all = write_columns(k_all, v_all, k, v, start)
            out = tap_site(tap, "resid_post", block.attend(h, q, k_all, v_all, mask, bias, tap))
            return out, (k_all, v_all)

        stacked = {} if sites is None else sites.stacked
        xs = (flags, cache.k, cache.v, jnp.arange(self.n_layers), stacked)
        h, (k, v) = scan_layers(self.layers, step, x, xs)
        hidden, _ = finish_sites(sites, self.head_input(h), None)
        return hidden, KVCache(k, v)
