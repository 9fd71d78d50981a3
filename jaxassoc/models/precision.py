"""Precision policies: the dtype a model's weights are stored in, the dtype of its activations (the residual
stream), and the matrix products between them.

Every product of an activation with a weight, and of queries with keys and attention weights with values, goes
through :func:`matmul` / :func:`einsum`: the activation is cast to the weight's dtype, the product accumulates in
float32 (``preferred_element_type``: bf16 x bf16 -> f32 dots, the fast path of TPUs, tensor cores and CPUs with
AMX or AVX512-BF16), and the result is in the activation's dtype. So one rule serves every policy:

- ``float32``: weights and activations in float32; the products at float32 precision on every device
  (``Precision.HIGHEST``: no TF32 on GPUs, no single bfloat16 pass on TPUs), so the numbers are the CPU's;
- ``mixed``: weights in bfloat16 (half the memory), activations in float32: the residual stream's sums, norms,
  softmaxes and the logits stay float32, only the products' inputs are rounded to bfloat16;
- ``bfloat16`` / ``float16``: weights and activations in that dtype (products still accumulate in float32 and
  are rounded once); the cheapest in memory, and the least faithful.

Norms, softmaxes and log-softmaxes compute in float32 under every policy (``layers.layer_norm``,
``attention.attention``, ``heads.next_token_logprobs``). The activation dtype is a field of the family config
(:class:`RunsIn`), so it is static under ``jit``: a policy compiles once, and configs of two policies never
share a compilation. Mixed precision in this sense: Micikevicius et al. 2018 (bfloat16 instead of float16, so
no loss scaling); the policy names follow ``jmp`` / Levanter (params, compute, output dtypes).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jaxtyping import Array

from jaxassoc.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Precision:
    """A precision policy: its name, the weights' dtype and the activations' dtype."""

    name: str
    params: str
    activations: str


POLICIES: dict[str, Precision] = {
    "float32": Precision("float32", "float32", "float32"),
    "mixed": Precision("mixed", "bfloat16", "float32"),
    "bfloat16": Precision("bfloat16", "bfloat16", "bfloat16"),
    "float16": Precision("float16", "float16", "float16"),
}
"""The policies ``model.precision`` / ``load_model(precision=...)`` name."""

DEFAULTS: dict[str, str] = {"cpu": "float32", "gpu": "mixed", "tpu": "mixed"}
"""``model.precision=auto`` by JAX backend: float32 where bfloat16 buys little or is emulated (a CPU: 1-2x,
AMX ~5x but opt-in so a laptop's numbers are the reference), mixed where the hardware computes in bfloat16
(tensor cores, TPU MXUs: 4-16x the float32 rate). Any other backend: float32."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunsIn:
    """Mixed into every family config: ``activations``, the dtype of the residual stream (``Precision.
    activations``), set by ``load_model`` from the policy; static under ``jit``."""

    activations: str = "float32"


def check_name(name: str) -> None:
    """ConfigError naming ``name`` unless it is a policy or ``auto`` (nothing is resolved: JAX's backend is not
    started)."""
    if name != "auto" and name not in POLICIES:
        raise ConfigError(
            f"model.precision={name} is not a precision policy; use one of {[*POLICIES, 'auto']} "
            "(mixed: bfloat16 weights and products, float32 activations)"
        )


def policy(name: str) -> Precision:
    """The policy ``name`` (``auto``: :data:`DEFAULTS` for JAX's default backend); ConfigError naming it."""
    check_name(name)
    if name == "auto":
        return POLICIES[DEFAULTS.get(jax.default_backend(), "float32")]
    return POLICIES[name]


FLOAT16_OVERFLOWS: dict[str, str] = {
    "gemma2": "Gemma's activations grow past float16's largest value, 65504",
    "gemma3_text": "Gemma's activations grow past float16's largest value, 65504",
    "t5": "T5's feed-forward activations overflow float16 (a known fault of its checkpoints in float16)",
}
"""HF ``model_type`` -> why the ``float16`` policy is refused for it (bfloat16 has float32's range)."""


def check_supported(chosen: Precision, model_type: str | None) -> None:
    """ConfigError, before any weights are read, for ``float16`` on a TPU (it computes in bfloat16) or for an
    architecture whose activations overflow in it (:data:`FLOAT16_OVERFLOWS`)."""
    if chosen.name != "float16":
        return
    if jax.default_backend() == "tpu":
        raise ConfigError("model.precision=float16: TPUs have no float16 matrix units; use model.precision=mixed")
    if model_type in FLOAT16_OVERFLOWS:
        raise ConfigError(
            f"model.precision=float16 is refused for {model_type}: {FLOAT16_OVERFLOWS[model_type]}; "
            "use model.precision=mixed or bfloat16 (float32's range)"
        )


def _accumulator(dtype) -> jnp.dtype:
    return jnp.promote_types(dtype, jnp.float32)


def _precision(dtype) -> jax.lax.Precision | None:
    """Full float32 products for float32 inputs (TF32 / bf16 passes are the accelerators' default)."""
    return jax.lax.Precision.HIGHEST if jnp.dtype(dtype) == jnp.float32 else None


def matmul(x: Array, w: Array) -> Array:
    """``x @ w`` under the policy the weight's dtype and the activation's dtype make: inputs in ``w``'s dtype,
    accumulation in float32 (float64 kept), the result in ``x``'s dtype. Its gradients follow the same rule: for a
    2-D weight narrower than float32 (bfloat16, float16), the backward products take the cotangent in the weight's
    dtype too (:func:`_narrow_matmul`), as mixed-precision training computes them, instead of upcasting the weight
    to float32."""
    if w.ndim == 2 and jnp.dtype(w.dtype).itemsize < 4:
        return _narrow_matmul(x, w)
    return _matmul(x, w)


def _matmul(x: Array, w: Array) -> Array:
    out = jnp.matmul(x.astype(w.dtype), w, precision=_precision(w.dtype), preferred_element_type=_accumulator(w.dtype))
    return out.astype(x.dtype)


@jax.custom_vjp
def _narrow_matmul(x: Array, w: Array) -> Array:
    return _matmul(x, w)


def _narrow_forward(x: Array, w: Array):
    return _matmul(x, w), (x, w)


def _narrow_backward(saved, g: Array):
    """``dx = g W^T`` and ``dW = x^T g``, each with inputs in ``W``'s dtype and float32 accumulation, returned in
    ``x``'s and ``W``'s dtypes (XLA drops ``dW`` where nothing reads it: a frozen weight's)."""
    x, w = saved
    g = g.astype(w.dtype)
    dx = jnp.matmul(g, w.T, preferred_element_type=jnp.float32).astype(x.dtype)
    dw = jnp.einsum("...i,...o->io", x.astype(w.dtype), g, preferred_element_type=jnp.float32).astype(w.dtype)
    return dx, dw


_narrow_matmul.defvjp(_narrow_forward, _narrow_backward)


def einsum(spec: str, x: Array, w: Array, *, dtype=None) -> Array:
    """``jnp.einsum(spec, x, w)`` with :func:`matmul`'s rule: inputs in ``w``'s dtype, accumulation in float32,
    the result in ``dtype`` (default: ``x``'s)."""
    out = jnp.einsum(
        spec, x.astype(w.dtype), w, precision=_precision(w.dtype), preferred_element_type=_accumulator(w.dtype)
    )
    return out.astype(x.dtype if dtype is None else dtype)


__all__ = [
    "DEFAULTS",
    "FLOAT16_OVERFLOWS",
    "POLICIES",
    "Precision",
    "RunsIn",
    "check_name",
    "check_supported",
    "einsum",
    "matmul",
    "policy",
]
