"""Alignment of model group-trait scores with human stereotype ratings (Cao et al. 2022, §3.2, §5.1–5.2;
docs/methods.md §3).

- Pair score of a trait pair (left − right pole, e.g. powerless − powerful): the median score over the
  right pole's synonyms minus the median over the left pole's (human ratings: 0 = left, 100 = right).
- Kendall τ-b between model pair scores and human mean ratings, per group (over its 16 pairs) and overall
  (over all group × pair cells).
- P@3 per group: the mean of two precisions — of the model's top-3 pairs (most right-pole) against the
  human ratings binarised at 50 (right pole iff rating > 50; no rating in the published data is exactly
  50), and of its bottom-3 pairs against the left pole. Overall P@3 is the mean over groups. Ties in model
  scores go to the earlier pair (``jax.lax.top_k``).
- Emergent intersectional scores of a paired group g = (g1, g2): S(g, t) − max(S(g1, t), S(g2, t)) and
  the counterpart S(g, t) − min(S(g1, t), S(g2, t)) (§5.2, Q3).
- Group names differ between the human study ("Blacks/African Americans") and the templates ("Black
  person"): :func:`human_group_indices` resolves them through an explicit mapping (``AbcData.human_groups``
  from :mod:`jaxassoc.data`) and names every group it cannot place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from jaxassoc import stats
from jaxassoc.errors import DataError, InputError
from jaxassoc.metrics.set_score import median_over_synonyms

TOP_K = 3
HUMAN_THRESHOLD = 50.0


class AlignmentResult(NamedTuple):
    """Kendall τ-b and P@3 between model pair scores and human ratings."""

    tau_per_group: Float[Array, " G"]
    tau_overall: Float[Array, ""]
    p_at_3_per_group: Float[Array, " G"]  # mean of the top-3 and bottom-3 precisions
    p_at_3_top: Float[Array, " G"]
    p_at_3_bottom: Float[Array, " G"]
    p_at_3_overall: Float[Array, ""]


class EmergentScores(NamedTuple):
    """Emergent intersectional scores (Cao et al. 2022, §5.2 Q3)."""

    above_max: Float[Array, "*s"]  # S(g, t) − max(S(g1, t), S(g2, t))
    below_min: Float[Array, "*s"]  # S(g, t) − min(S(g1, t), S(g2, t))


@jax.jit
def pair_scores(
    left: Float[Array, "*g K"],
    left_valid: Bool[Array, "*g K"],
    right: Float[Array, "*g K"],
    right_valid: Bool[Array, "*g K"],
) -> Float[Array, "*g"]:
    """Median over the right pole's synonyms minus the median over the left pole's."""
    return median_over_synonyms(right, right_valid) - median_over_synonyms(left, left_valid)


@jax.jit
def precision_at_3(model: Float[Array, "G T"], human: Float[Array, "G T"]) -> tuple[Array, Array, Array]:
    """Per group: (mean of both, top-3 precision, bottom-3 precision), human binarised at 50."""
    right = human > HUMAN_THRESHOLD
    top = jax.lax.top_k(model, TOP_K)[1]
    bottom = jax.lax.top_k(-model, TOP_K)[1]
    p_top = jnp.take_along_axis(right, top, axis=1).mean(axis=1)
    p_bottom = (~jnp.take_along_axis(right, bottom, axis=1)).mean(axis=1)
    return (p_top + p_bottom) / 2, p_top, p_bottom


def alignment(model: ArrayLike, human: ArrayLike) -> AlignmentResult:
    """Kendall τ-b and P@3, per group and overall, of model pair scores vs human ratings (both (G, T))."""
    model, human = np.asarray(model, np.float32), np.asarray(human, np.float32)
    if model.ndim != 2 or model.shape != human.shape:
        raise InputError(
            f"alignment: model scores and human ratings must both be (groups, trait pairs); got {model.shape} and {human.shape}"
        )
    if model.shape[1] < 2 * TOP_K:
        raise InputError(f"alignment: P@3 needs at least {2 * TOP_K} trait pairs per group; got {model.shape[1]}")
    if not np.isfinite(human).all():
        raise InputError("alignment: human ratings contain NaN or infinite values")
    if not np.isfinite(model).all():
        bad = sorted({int(g) for g in np.argwhere(~np.isfinite(model))[:, 0]})
        raise InputError(
            f"alignment: model scores of groups {bad} are NaN or infinite (the parity log(1 − d) transform is NaN "
            f"for distances ≥ 1: use the default −d transform, or drop those groups)"
        )
    taus = jnp.stack([stats.kendall_tau_b(m, h) for m, h in zip(model, human)])
    p3, p_top, p_bottom = precision_at_3(jnp.asarray(model), jnp.asarray(human))
    return AlignmentResult(
        tau_per_group=taus,
        tau_overall=stats.kendall_tau_b(model.ravel(), human.ravel()),
        p_at_3_per_group=p3,
        p_at_3_top=p_top,
        p_at_3_bottom=p_bottom,
        p_at_3_overall=jnp.mean(p3),
    )


@jax.jit
def emergent_scores(
    paired: Float[Array, "*s"], first: Float[Array, "*s"], second: Float[Array, "*s"]
) -> EmergentScores:
    """How far a paired group's score exceeds (falls below) the max (min) of its components'."""
    return EmergentScores(above_max=paired - jnp.maximum(first, second), below_min=paired - jnp.minimum(first, second))


def human_group_indices(
    human_groups: Sequence[str], mapping: Mapping[str, str], model_groups: Sequence[str]
) -> list[int]:
    """Position in ``model_groups`` of each human-study group, through ``mapping`` (human → model name).

    Raises :class:`~jaxassoc.errors.DataError` naming every human group without a mapping and every
    mapped name missing from ``model_groups``.
    """
    unmapped = [g for g in human_groups if g not in mapping]
    if unmapped:
        raise DataError(
            f"human groups {unmapped} have no entry in the group-name mapping; add them to "
            f"jaxassoc.data.stereotypes.HUMAN_GROUPS (human-study name -> template group)"
        )
    position = {g: i for i, g in enumerate(model_groups)}
    missing = [f"{g!r} -> {mapping[g]!r}" for g in human_groups if mapping[g] not in position]
    if missing:
        raise DataError(f"human groups map to names absent from the scored groups: {missing}")
    return [position[mapping[g]] for g in human_groups]
