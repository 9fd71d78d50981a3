"""RPAM: the Relative Probability Association Metric (Hodel, West & Caliskan 2026, §4 and App. E).

The kernels take what a causal LM gives for each target prompt, as arrays:

- ``first_logits[t, c]``: the next-token logit of attribute c's first token after target t's prompt;
- ``continuation[t, c]``: for a multi-token attribute, the mean over its remaining subwords of their
  full-vocabulary probabilities, each computed left to right with the earlier subwords appended
  (App. E, after Kurita et al. 2019); 1 for single-token attributes;
- ``log_partition[t]``: log Σ_V exp(logits) of the first position, only for the ablation without
  normalisation (full-vocabulary probabilities instead of the softmax over C).

p(v, t) = softmax_C(z(·, t))_v × continuation (Eq. in §4 "Formal definition of RPAM"); the attribute set
C = A ∪ B is ordered A first. Everything is differentiable in the logits, and so, through the caller's
forward pass, in the output head.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxassoc.metrics.weat import _split_at, association_test, effect_size
from jaxassoc.stats import StatsOptions
from jaxassoc.stats.keys import check_key


class RpamTestResult(NamedTuple):
    """RPAM Test (Eq. 1-2): d with its permutation p-value and a bootstrap CI over targets."""

    d: Float[Array, ""]
    associations: Float[Array, " n"]  # s(t, A, B) for X then Y
    p_value: Float[Array, ""]
    exact: Bool[Array, ""]
    n_resamples: Int[Array, ""]
    ci_low: Float[Array, ""]
    ci_high: Float[Array, ""]
    defined: Bool[Array, ""]  # False: s is constant; d, p and CI are NaN (weat.UNDEFINED_CONSTANT_S)


@functools.partial(jax.jit, static_argnames=("normalise",))
def relative_probabilities(
    first_logits: Float[Array, "T C"],
    continuation: Float[Array, "T C"] | None = None,
    log_partition: Float[Array, " T"] | None = None,
    *,
    normalise: bool = True,
) -> Float[Array, "T C"]:
    """p(v, t): softmax over the attribute set of first-token logits, times the continuation factor.

    ``normalise=False`` is the paper's ablation (App. F, Table 6): the full-vocabulary probability of
    the first token, exp(z - log_partition), in place of the softmax over C.
    """
    if normalise:
        p_first = jax.nn.softmax(first_logits, axis=-1)
    else:
        if log_partition is None:
            raise ValueError("normalise=False needs log_partition (log-sum-exp over the vocabulary)")
        p_first = jnp.exp(first_logits - log_partition[:, None])
    return p_first if continuation is None else p_first * continuation


@functools.partial(jax.jit, static_argnames=("n_a",))
def association_scores(p: Float[Array, "T C"], *, n_a: int) -> Float[Array, " T"]:
    """Eq. 2: s(t, A, B) = mean_{a∈A} p(a, t) - mean_{b∈B} p(b, t); columns are A then B."""
    return p[:, :n_a].mean(axis=1) - p[:, n_a:].mean(axis=1)


@functools.partial(jax.jit, static_argnames=("n_x", "n_a", "ddof", "normalise"))
def rpam_effect_size(
    first_logits: Float[Array, "T C"],
    continuation: Float[Array, "T C"] | None = None,
    log_partition: Float[Array, " T"] | None = None,
    *,
    n_x: int,
    n_a: int,
    ddof: int = StatsOptions.ddof,
    normalise: bool = True,
) -> Float[Array, ""]:
    """Eq. 1 from logits alone (rows: X then Y targets): a scalar to differentiate."""
    s = association_scores(
        relative_probabilities(first_logits, continuation, log_partition, normalise=normalise), n_a=n_a
    )
    return effect_size(s[:n_x], s[n_x:], ddof=ddof)


def rpam_test(
    key: PRNGKeyArray,
    p: Float[Array, "T C"],
    *,
    n_x: int,
    n_a: int,
    options: StatsOptions = StatsOptions(),
) -> RpamTestResult:
    """RPAM Test: d (Eq. 1), WEAT's permutation p-value on s (``options.alternative``), and a bootstrap CI of d;
    ``options`` (:class:`~jaxassoc.stats.StatsOptions`) as in :func:`jaxassoc.metrics.weat.weat`.

    ``p`` holds p(v, t) for targets X then Y (rows) and attributes A then B (columns). The permutation
    test and the CI are those of :func:`jaxassoc.metrics.weat.weat`, applied to the RPAM scores s; with
    constant s (every target's mean probabilities of A and B differ equally, up to rounding), d, p and the
    CI are NaN and ``defined`` is False.
    """
    s, scale = _scores_and_scale(p, n_a=n_a)
    test = association_test(check_key("rpam_test", key), s, n_x, options=options, scale=scale)
    # d eagerly, op by op, as before: one jitted function rounds differently (1 ulp in a third of cases)
    d = jnp.where(test.defined, effect_size(*_split_at(s, n_x), ddof=options.ddof), jnp.nan)
    return RpamTestResult(d=d, associations=s, **test._asdict())


@functools.partial(jax.jit, static_argnames=("n_a",))
def _scores_and_scale(p: Float[Array, "T C"], *, n_a: int) -> tuple[Float[Array, " T"], Float[Array, ""]]:
    """Eq. 2's s and the magnitude of the means it is a difference of (for ``is_constant``), one compilation."""
    scale = jnp.maximum(p[:, :n_a].mean(axis=1), p[:, n_a:].mean(axis=1)).max()
    return association_scores(p, n_a=n_a), scale


def rpam_valence(p: Float[Array, "T C"], *, n_pleasant: int) -> Float[Array, " T"]:
    """RPAM Valence (the SC-WEAT analogue): s(t, P, U) with P the pleasant, U the unpleasant words."""
    return association_scores(p, n_a=n_pleasant)
