"""Causal mediation analysis' effects (Vig et al. 2020; docs/methods.md §10) from the pronoun log-odds of its
runs (:mod:`jaxassoc.readouts.mediation`): each example's total effect (:func:`per_example`), and the
aggregates (:func:`summarize`): a row ``component=total`` (the total effect of set-gender), one row per head
(``component=head``, integer ``layer`` and ``head``) with its natural indirect and direct effects, and one per
selected neuron (``component=neuron``, ``layer`` and ``neuron``); every row carries ``total_effect`` and ``n``
(examples). Each effect has a percentile CI from one cluster bootstrap over professions (:class:`Bootstrap`;
docs/methods.md §10.8).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from jaxassoc.metrics.mediation import relative_change
from jaxassoc.stats.cluster_bootstrap import cluster_bootstrap_means


def per_example(frame: pd.DataFrame, runs: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per kept example: template, profession, stereotype, set-gender word, ``y_null`` and
    ``y_set_gender`` (p(anti) / p(stereo)), and its total effect ``y_set_gender / y_null − 1``."""
    out = frame[["template", "profession", "stereotype", "set_gender"]].reset_index(drop=True)
    out["y_null"] = np.exp(runs["lo_base"])
    out["y_set_gender"] = np.exp(runs["lo_alt"])
    out["total_effect"] = np.asarray(relative_change(runs["lo_alt"], runs["lo_base"]))
    return out


@dataclass(frozen=True)
class Bootstrap:
    """The CI settings of the effects: the key, each example's profession (0..C-1), resamples, level."""

    key: jax.Array
    professions: np.ndarray
    n_resamples: int
    confidence: float


def _effects(changes: dict[str, np.ndarray], bootstrap: Bootstrap) -> dict[str, tuple[np.ndarray, ...]]:
    """Each named effect (per-example relative changes ``(n,)`` or ``(n, K)``) as its mean and CI bounds,
    from one cluster bootstrap over professions for all of them."""
    flat = {name: c.reshape(len(c), -1) for name, c in changes.items()}
    result = cluster_bootstrap_means(
        bootstrap.key,
        np.concatenate(list(flat.values()), axis=1),
        bootstrap.professions,
        n_resamples=bootstrap.n_resamples,
        confidence=bootstrap.confidence,
    )
    bounds = np.cumsum([0, *(f.shape[1] for f in flat.values())])
    arrays = [np.asarray(a) for a in result[:3]]
    return {name: tuple(a[lo:hi] for a in arrays) for name, lo, hi in zip(flat, bounds[:-1], bounds[1:])}


def _effect_columns(effects: dict, indirect: str, direct: str) -> dict[str, np.ndarray]:
    (ie, ie_low, ie_high), (de, de_low, de_high) = effects[indirect], effects[direct]
    return {
        "indirect_effect": ie,
        "indirect_ci_low": ie_low,
        "indirect_ci_high": ie_high,
        "direct_effect": de,
        "direct_ci_low": de_low,
        "direct_ci_high": de_high,
    }


def summarize(
    runs: dict[str, np.ndarray], n_layers: int, n_heads: int, selected: np.ndarray, bootstrap: Bootstrap
) -> pd.DataFrame:
    """The total effect row, one row per head, one per selected neuron (docs/methods.md §10.2), each effect
    with its CI over professions (§10.8)."""
    lo = runs["lo_base"]
    names = ["lo_alt", "head_indirect", "head_direct", *(["neuron_indirect", "neuron_direct"] if len(selected) else [])]
    effects = _effects({name: np.asarray(relative_change(runs[name], lo)) for name in names}, bootstrap)
    heads = pd.DataFrame(
        {
            "component": "head",
            "layer": np.repeat(np.arange(n_layers), n_heads),
            "head": np.tile(np.arange(n_heads), n_layers),
            **_effect_columns(effects, "head_indirect", "head_direct"),
        }
    )
    parts = [pd.DataFrame({"component": ["total"]}), heads]
    if len(selected):
        parts.append(
            pd.DataFrame(
                {
                    "component": "neuron",
                    "layer": selected[:, 0],
                    "neuron": selected[:, 1],
                    **_effect_columns(effects, "neuron_indirect", "neuron_direct"),
                    "attribution_estimate": runs["neuron_estimate"],
                }
            )
        )
    out = pd.concat(parts, ignore_index=True)
    for column in ("layer", "head", "neuron"):
        if column in out:
            out[column] = out[column].astype("Int64")
    (total,), (total_low,), (total_high,) = effects["lo_alt"]
    out["total_effect"], out["total_ci_low"], out["total_ci_high"] = float(total), float(total_low), float(total_high)
    out["n"] = len(lo)
    out["n_professions"] = int(bootstrap.professions.max()) + 1
    out["confidence"] = bootstrap.confidence
    out["n_bootstrap"] = bootstrap.n_resamples
    return out
