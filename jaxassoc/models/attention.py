"""Multi-head attention as an NNX module, split where the key/value cache sits (``project`` / ``attend``).

Query, key, value and output projections (``q``, ``k``, ``v``, ``o``: :class:`~jaxassoc.models.linear.Linear`),
grouped-query heads (Ainslie et al. 2023: ``kv_heads`` key/value heads shared by the query heads), optional
biases on q/k/v (Qwen2), optional per-head RMSNorm of queries and keys before the rotation (``q_norm``,
``k_norm``; Qwen3, Gemma 3 with ``norm_plus_one``), optional clamping of the projections to ``±clip``
(OLMo, MPT), a score ``scale`` other than ``head_dim^-1/2`` (GPT-Neo, MPT, Gemma), a ``softcap`` of the scores
(Gemma 2), scores computed in float32 (``f32_scores``: GPT-Neo, GPT-J) and the rotary layout: ``rotary="half"``
(HF's "rotate half", on the first ``rotary_dim`` dimensions given by the tables), ``"pairs"`` (GPT-J's
interleaved pairs) or None (positions enter elsewhere: learned tables, ALiBi). The scores follow
:func:`jaxassoc.models.layers.attention` (Vaswani et al. 2017, eq. 1).
"""

from __future__ import annotations

import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Bool, Float

from jaxassoc.models.layers import apply_rope, attention, head_scale
from jaxassoc.models.linear import Linear
from jaxassoc.models.norms import RMSNorm
from jaxassoc.models.sites import Tap, tap_site


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

    def project(
        self, h: Float[Array, "B T D"], rope: tuple[Array, Array] | None, tap: Tap | None = None
    ) -> tuple[Float[Array, "B T H d"], Float[Array, "B T G d"], Float[Array, "B T G d"]]:
        """Queries and keys (head-normalised when ``qk_norm``, then rotated by ``rope = (cos, sin)`` unless
        ``rotary`` is None) and values: the sites ``attn.q``, ``attn.k``, ``attn.v`` of ``tap``."""
        q, k, v = self._project(h, rope)
        return tap_site(tap, "attn.q", q), tap_site(tap, "attn.k", k), tap_site(tap, "attn.v", v)

    def _project(self, h, rope):
        B, T, _ = h.shape
        q, k, v = self.q(h), self.k(h), self.v(h)
        if self.clip is not None:
            q, k, v = (jnp.clip(a, -self.clip, self.clip) for a in (q, k, v))
        q = q.reshape(B, T, self.heads, self.head_dim)
        k = k.reshape(B, T, self.kv_heads, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        v = v.reshape(B, T, self.kv_heads, self.head_dim)
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
        the site ``attn.pattern`` of ``tap``, the heads' outputs before the projection ``attn.heads``."""
        B, T = q.shape[:2]
        if self.f32_scores:
            up = jnp.promote_types(q.dtype, jnp.float32)
            q, k = q.astype(up), k.astype(up)
        attended = attention(q, k, v, allowed, self.scale, bias=bias, softcap=self.softcap, tap=tap)
        attended = tap_site(tap, "attn.heads", attended)
        return self.o(attended.reshape(B, T, -1))
