"""Attribution of a scalar score of a model's output to its named sites (docs/methods.md §10.4).

- gradient × activation: ``a ⊙ ∂s/∂a`` at every requested site, from one forward and one backward pass
  (the gradient is taken w.r.t. a zero :class:`~jaxassoc.models.sites.Add` at each site, the activation
  read in the same pass);
- attribution patching (Syed et al. 2023; Nanda 2023): the first-order estimate of the score's change when
  a site is patched from a corrupted run, ``(a_corrupt − a_clean) · ∂s/∂a |_clean``, summed per head
  (``attn.heads``) or per neuron (``mlp.hidden``): one backward pass for every head instead of one forward
  pass per head.

``score(out: ForwardOutput) -> scalar`` is any differentiable function of the run's output (e.g. a
log-odds of two tokens through the head, a metric of the hidden states).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxassoc.errors import ModelError
from jaxassoc.models.base import ForwardOutput
from jaxassoc.models.interventions import layer_count, run_parts, site_shapes
from jaxassoc.models.sites import ALL_LAYERS, MODEL_SITES, Add, parse_site

Score = Callable[[ForwardOutput], Float[Array, ""]]


def _site_shape(name: str, shapes: Mapping[str, tuple[int, ...]], n_layers: int, B: int, T: int) -> tuple[int, ...]:
    site = parse_site(name, n_layers)
    lead = (n_layers,) if site.layer == ALL_LAYERS else ()
    return (*lead, B, T, *shapes[site.kind])


def gradients(
    port: Any,
    body: Mapping,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    score: Score,
    *,
    config: Any,
    sites: Sequence[str],
) -> tuple[Float[Array, ""], dict[str, Array], dict[str, Array]]:
    """``(score, activations, gradients)`` at ``sites`` (names as :func:`~jaxassoc.models.interventions.run_parts`
    takes them) from one forward and one backward pass."""
    n_layers = layer_count(body)
    shapes = site_shapes(port, body, config=config)
    B, T = input_ids.shape
    zeros = {name: jnp.zeros(_site_shape(name, shapes, n_layers, B, T)) for name in sites}

    def scored(deltas):
        out = run_parts(
            port,
            body,
            input_ids,
            attention_mask,
            config=config,
            read=tuple(sites),
            edits={name: Add(delta) for name, delta in deltas.items()},
        )
        return score(out), out.sites

    (value, acts), grads = jax.value_and_grad(scored, has_aux=True)(zeros)
    return value, acts, grads


def grad_times_activation(
    port: Any,
    body: Mapping,
    input_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    score: Score,
    *,
    config: Any,
    sites: Sequence[str],
) -> dict[str, Array]:
    """``a ⊙ ∂score/∂a`` at each site (same shape as the site)."""
    _, acts, grads = gradients(port, body, input_ids, attention_mask, score, config=config, sites=sites)
    return {name: acts[name] * grads[name] for name in sites}


def unit_totals(values: Float[Array, "L B T ..."], kind: str) -> Float[Array, "L ..."]:
    """Sum a ``layers.*`` attribution ``(L, B, T, ...)`` over batch and positions, and over a head's
    dimensions for ``attn.heads``: per layer and head ``(L, H)``, per neuron ``(L, F)`` (Mixtral: ``(L, E, F)``),
    per residual dimension ``(L, D)``."""
    summed = values.sum(axis=(1, 2))
    return summed.sum(axis=-1) if kind == "attn.heads" else summed


def attribution_patching(
    port: Any,
    body: Mapping,
    clean_ids: Int[Array, "B T"],
    corrupt_ids: Int[Array, "B T"],
    attention_mask: Int[Array, "B T"],
    score: Score,
    *,
    config: Any,
    kind: str = "attn.heads",
) -> Float[Array, "L N"]:
    """The estimated change of ``score`` when each unit (head or neuron) of every layer's ``kind`` site is
    patched from the corrupted run into the clean one: ``Σ_{b,t,d} (a_corrupt − a_clean) ∂s/∂a_clean``,
    ``(layers, units)``. Two forward passes and one backward pass; equal orders of magnitude to exact
    patching for small differences (tested against it), only a first-order estimate for large ones."""
    if kind in MODEL_SITES:
        raise ModelError(f"attribution patching is per layer; {kind!r} is a model site")
    name = f"layers.{ALL_LAYERS}.{kind}"
    corrupt = run_parts(port, body, corrupt_ids, attention_mask, config=config, read=(name,)).sites[name]
    _, acts, grads = gradients(port, body, clean_ids, attention_mask, score, config=config, sites=(name,))
    return unit_totals((corrupt - acts[name]) * grads[name], kind)


__all__ = ["attribution_patching", "grad_times_activation", "gradients", "unit_totals"]
