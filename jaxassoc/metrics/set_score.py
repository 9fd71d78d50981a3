"""From SeT distances to group-trait scores (Cao et al. 2022, §3.1–3.2; docs/methods.md §3).

- Transform of one subword's distance d = ‖ΔA‖_F: ``"neg_distance"`` (default) −d, always finite and
  monotone; ``"log1m"`` (parity) log(1 − d) as the authors' ``quick_set.py``, NaN when d > 1 and −inf at 1.
- A multi-subword trait is filled left to right, one problem per subword, and takes the minimum over its
  subwords. ``nan_policy="python"`` (parity) reproduces the original's Python ``min`` over a list: a NaN
  in the first subword makes the word NaN, a NaN in a later subword is skipped; ``"propagate"``
  (default) is ``jnp.min`` (NaN if any subword is NaN). The two differ only where NaNs occur, i.e. only
  under ``"log1m"``. (The paper's text says "maximum"; the code, which produced its numbers, takes the
  minimum of log(1 − d), i.e. the largest distance: we follow the code.)
- Synonyms of a trait pole are combined by the median (``np.median``: NaN if any synonym is NaN).
- The group score is the group's score minus the prior noun's ("person"/"people"/"People").

Ragged inputs (2–4 synonyms, 1–4 subwords) are padded and carry a boolean ``valid`` mask.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from jaxassoc.errors import ConfigError

TRANSFORMS = ("neg_distance", "log1m")
NAN_POLICIES = ("propagate", "python")


def transform_distance(distance: Float[Array, "*s"], transform: str = "neg_distance") -> Float[Array, "*s"]:
    """Score of one subword: −d (default) or log(1 − d) (the original; NaN for d > 1)."""
    if transform == "neg_distance":
        return -distance
    if transform == "log1m":
        return jnp.log1p(-distance)
    raise ConfigError(f"SeT score transform {transform!r} is unknown: use one of {list(TRANSFORMS)}")


@functools.partial(jax.jit, static_argnames=("nan_policy",))
def min_over_subwords(
    scores: Float[Array, "*w S"], valid: Bool[Array, "*w S"], nan_policy: str = "propagate"
) -> Float[Array, "*w"]:
    """The word's score: the minimum over its valid subwords (see the module docstring for NaNs).

    Valid subwords come first in each row (subword 0 is always valid).
    """
    if nan_policy not in NAN_POLICIES:
        raise ConfigError(f"nan_policy {nan_policy!r} is unknown: use one of {list(NAN_POLICIES)}")
    padded = jnp.where(valid, scores, jnp.inf)
    if nan_policy == "propagate":
        return jnp.min(padded, axis=-1)
    # Python's min keeps its running value unless a later item compares smaller: NaN never does, and a
    # NaN running value is never replaced.
    return jnp.where(jnp.isnan(scores[..., 0]), jnp.nan, jnp.nanmin(padded, axis=-1))


@jax.jit
def median_over_synonyms(scores: Float[Array, "*p K"], valid: Bool[Array, "*p K"]) -> Float[Array, "*p"]:
    """``np.median`` over the valid synonyms of each row (NaN if any valid entry is NaN)."""
    has_nan = jnp.any(valid & jnp.isnan(scores), axis=-1)
    ordered = jnp.sort(jnp.where(valid, scores, jnp.inf), axis=-1)
    n = jnp.sum(valid, axis=-1)
    lo = jnp.take_along_axis(ordered, ((n - 1) // 2)[..., None], axis=-1)[..., 0]
    hi = jnp.take_along_axis(ordered, (n // 2)[..., None], axis=-1)[..., 0]
    return jnp.where(has_nan | (n == 0), jnp.nan, (lo + hi) / 2)


def group_minus_prior(group_score: Float[Array, "*s"], prior_score: Float[Array, "*s"]) -> Float[Array, "*s"]:
    """The association of a group with a trait, net of the prior noun's (as ILPS, Kurita et al. 2019)."""
    return group_score - prior_score


def set_word_scores(
    distance: Float[Array, "*w S"],
    valid: Bool[Array, "*w S"],
    *,
    transform: str = "neg_distance",
    nan_policy: str = "propagate",
) -> Float[Array, "*w"]:
    """Per-subword distances → one score per word: transform, then the minimum over subwords."""
    return min_over_subwords(transform_distance(distance, transform), valid, nan_policy=nan_policy)
