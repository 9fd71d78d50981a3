"""Multi-head attention as an NNX module, split where the key/value cache sits (``project`` / ``attend``).

Query, key, value and output projections (``q``, ``k``, ``v``, ``o``: :class:`~jaxassoc.models.linear.Linear`),
grouped-query heads (Ainslie et al. 2023: ``kv_heads`` key/value heads shared by the query heads), optional
biases on q/k/v (Qwen2), optional per-head RMSNorm of queries and keys before the rotation (``q_norm``,
``k_norm``; Qwen3, Gemma 3 with ``norm_plus_one``), optional clamping of the projections to ``±clip``
(OLMo, MPT), a score ``scale`` other than ``head_dim^-1/2`` (GPT-Neo, MPT, Gemma), a ``softcap`` of the scores
(Gemma 2), scores computed in float32 (``f32_scores``: GPT-Neo, GPT-J) and the rotary layout: ``rotary="half"``
(HF's "rotate half", on the first ``rotary_dim`` dimensions given by the tables), ``"pairs"`` (GPT-J's
interleaved pairs) or None (positions enter elsewhere: learned tables, ALiBi). The scores follow
:func:`attention` (Vaswani et al. 2017, eq. 1), the one attention function every port uses, which also
exposes the weights as the site ``attn.pattern``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float

from jaxassoc.models.linear import Linear
from jaxassoc.models.norms import RMSNorm
from jaxassoc.models.precision import einsum
from jaxassoc.models.rope import apply_rope
from jaxassoc.models.sites import Tap, tap_site


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
    site: str = "attn.pattern",
) -> Float[Array, "B T H K"]:
    """Scaled dot-product attention (Vaswani et al. 2017, eq. 1) with grouped-query heads (Ainslie et al.
    2023: the H query heads share G key/value heads, H a multiple of G); softmax in float32, the two products
    with inputs in the keys' and values' dtypes accumulated in float32 (``precision.einsum``); the output in
    the values' dtype.

    ``allowed[b, 0, t, s]`` says whether query t may see key s (causal, segment, window and padding masks
    are all such arrays). Disallowed scores are set to the float32 minimum (not -inf), as in HF, so a query
    row with no allowed key (a padding row) gives finite values instead of NaN. ``bias`` (broadcastable to
    ``(B, H, T, S)``, e.g. ALiBi's) is added to the scaled scores; ``softcap`` then caps them smoothly,
    ``c * tanh(scores / c)`` (Gemma 2). The weights are the site ``site`` of ``tap`` (T5's cross-attention:
    ``cross_attn.pattern``).
    """
    B, T, H, K = q.shape
    G = k.shape[2]
    grouped = q.reshape(B, T, G, H // G, K)
    scores = einsum("btgnk,bsgk->bgnts", grouped, k, dtype=jnp.float32) * scale
    if bias is not None:
        bias = jnp.broadcast_to(bias, (B, H, T, scores.shape[-1])).reshape(B, G, H // G, T, -1)
        scores = scores + bias.astype(jnp.float32)
    if softcap is not None:
        scores = softcap * jnp.tanh(scores / softcap)
    scores = jnp.where(allowed[:, :, None], scores, jnp.finfo(jnp.float32).min)
    weights = tapped_pattern(tap, site, jax.nn.softmax(scores, axis=-1), G)
    return einsum("bgnts,bsgk->btgnk", weights, v, dtype=v.dtype).reshape(B, T, H, K)


def tapped_pattern(tap: Tap | None, kind: str, weights: Float[Array, "B G n T S"], groups: int) -> Array:
    """``weights`` (grouped heads) as ``tap`` leaves the site ``kind`` (``(B, T, H, S)``, query by key), or
    untouched (no transposes traced) when the run neither reads nor edits it."""
    if tap is None or not tap.wants(kind):
        return weights
    B, G, n, T, S = weights.shape
    pattern = tap(kind, weights.transpose(0, 3, 1, 2, 4).reshape(B, T, G * n, S))
    return pattern.reshape(B, T, G, n, S).transpose(0, 2, 3, 1, 4)


def split_heads(x: Float[Array, "B T D"], n_heads: int) -> Float[Array, "B T H K"]:
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads)


def merge_heads(x: Float[Array, "B T H K"]) -> Float[Array, "B T D"]:
    B, T, H, K = x.shape
    return x.reshape(B, T, H * K)


def head_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)


class Attention(nnx.Module):
    """Grouped-query self-attention. State: ``{"q", "k", "v", "o"}`` (each ``{"w"}``, q/k/v with ``"b"`` when
    ``qkv_bias``, o when ``o_bias``), plus ``{"q_norm", "k_norm"}`` (each ``{"scale"}``) when ``qk_norm``."""

    def __init__(
        self,
        dim: int,
        heads: int,
        kv_heads: int,
        head_dim: int,
        *,
        eps: float,
        qkv_bias: bool = False,
        o_bias: bool = False,
        qk_norm: bool = False,
        norm_plus_one: bool = False,
        clip: float | None = None,
        scale: float | None = None,
        softcap: float | None = None,
        f32_scores: bool = False,
        rotary: str | None = "half",
        prefix: str = "attn",
        lead: tuple[int, ...] = (),
    ):
        self.q = Linear(dim, heads * head_dim, axes=("embed", "heads"), heads=heads, bias=qkv_bias, lead=lead)
        kv = dict(axes=("embed", "kv_heads"), heads=kv_heads, bias=qkv_bias, lead=lead)
        self.k = Linear(dim, kv_heads * head_dim, **kv)
        self.v = Linear(dim, kv_heads * head_dim, **kv)
        if qk_norm:
            self.q_norm = RMSNorm(head_dim, eps, plus_one=norm_plus_one, lead=lead)
            self.k_norm = RMSNorm(head_dim, eps, plus_one=norm_plus_one, lead=lead)
        self.o = Linear(heads * head_dim, dim, axes=("heads", "embed"), heads=heads, bias=o_bias, lead=lead)
        self.heads, self.kv_heads, self.head_dim, self.clip = heads, kv_heads, head_dim, clip
        self.scale = head_scale(head_dim) if scale is None else scale
        self.softcap = softcap
        self.f32_scores = f32_scores
        self.rotary = rotary
        self.prefix = prefix  # its sites' names: attn.q, ...; T5's cross-attention: cross_attn.q, ...

    def project(
        self,
        h: Float[Array, "B T D"],
        rope: tuple[Array, Array] | None,
        tap: Tap | None = None,
        memory: Float[Array, "B S D"] | None = None,
    ) -> tuple[Float[Array, "B T H d"], Float[Array, "B S G d"], Float[Array, "B S G d"]]:
        """Queries of ``h`` and keys and values of ``memory`` (cross-attention) or of ``h`` itself; queries and
        keys head-normalised when ``qk_norm``, then rotated by ``rope = (cos, sin)`` unless ``rotary`` is None:
        the sites ``<prefix>.q``, ``.k``, ``.v`` of ``tap``."""
        q, k, v = self._project(h, h if memory is None else memory, rope)
        return tuple(tap_site(tap, f"{self.prefix}.{name}", x) for name, x in zip("qkv", (q, k, v)))

    def _project(self, h, source, rope):
        q, k, v = self.q(h), self.k(source), self.v(source)
        if self.clip is not None:
            q, k, v = (jnp.clip(a, -self.clip, self.clip) for a in (q, k, v))
        q = q.reshape(*h.shape[:2], self.heads, self.head_dim)
        k = k.reshape(*source.shape[:2], self.kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        v = v.reshape(*source.shape[:2], self.kv_heads, self.head_dim)
        if self.rotary is None:
            return q, k, v
        cos, sin = rope
        pairs = self.rotary == "pairs"
        return apply_rope(q, cos, sin, pairs=pairs), apply_rope(k, cos, sin, pairs=pairs), v

    def attend(
        self,
        q: Float[Array, "B T H d"],
        k: Float[Array, "B S G d"],
        v: Float[Array, "B S G d"],
        allowed: Bool[Array, "B 1 T S"],
        bias: Array | None = None,
        tap: Tap | None = None,
    ) -> Float[Array, "B T D"]:
        """The output projection of the queries' attention over the (cached) keys and values; the weights are
        the site ``<prefix>.pattern`` of ``tap``, the heads' outputs before the projection ``<prefix>.heads``."""
        B, T = q.shape[:2]
        states = q.dtype  # the activations' dtype; the products' inputs are the weights' (precision policy)
        computed = jnp.promote_types(self.o.w.dtype, jnp.float32) if self.f32_scores else self.o.w.dtype
        q, k, v = q.astype(computed), k.astype(computed), v.astype(self.o.w.dtype)
        attended = attention(
            q, k, v, allowed, self.scale, bias=bias, softcap=self.softcap, tap=tap, site=f"{self.prefix}.pattern"
        )
        attended = tap_site(tap, f"{self.prefix}.heads", attended.astype(states))
        return self.o(attended.reshape(B, T, -1))
