"""Rotary position embeddings (Su et al. 2021): the inverse frequencies, with the linear, dynamic and
Llama 3 rescalings (HF ``rope_type``), their tables per position, their application to queries and keys,
and the HF config fields that set them."""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxassoc.errors import ModelError


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
