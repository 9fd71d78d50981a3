"""CrowS-Pairs' table (Nangia et al. 2020; docs/methods.md §6) from the pairs' sentence scores
(:func:`jaxassoc.readouts.crows_pairs.score_pairs`): each pair's outcome (:func:`per_pair`), then one row per
bias type and a row ``all`` (:func:`summarize`): ``metric_score`` (percent of pairs whose more-stereotyping
sentence scores higher) with its exact Clopper–Pearson CI and binomial test against 50 %, and the stereotype
and anti-stereotype scores.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jaxassoc.metrics.crows_pairs import DECIMALS, MORE, NEUTRAL, direction_score, metric_score, pair_outcomes
from jaxassoc.stats.binomial import binomial_test

ALL = "all"
OUTCOME_NAMES = {MORE: "more", NEUTRAL: "neutral", -MORE: "less"}


def per_pair(pairs: pd.DataFrame, scores: dict[str, np.ndarray]) -> pd.DataFrame:
    """The pairs with their two scores, tokens scored, ``outcome`` (``more`` / ``less`` / ``neutral``) and
    the authors' ``score`` (1 when the pair counts for the model)."""
    out = pairs.copy()
    for k, v in scores.items():
        out[k] = v
    outcomes = pair_outcomes(out["sent_more_score"], out["sent_less_score"])
    out["outcome"] = [OUTCOME_NAMES[int(o)] for o in outcomes]
    out["score"] = (outcomes == MORE).astype(int)
    return out


def summarize(items: pd.DataFrame, *, alternative: str, confidence: float) -> pd.DataFrame:
    """One row for all pairs, then one per bias type (most pairs first): n, neutral pairs, metric score
    (%) with its CI and test against 50 %, stereotype and anti-stereotype scores (%) and their n."""
    order = items["bias_type"].value_counts(sort=True).index.tolist()
    rows = []
    for name in [ALL, *order]:
        part = items if name == ALL else items[items["bias_type"] == name]
        outcomes = pair_outcomes(part["sent_more_score"], part["sent_less_score"])
        test = binomial_test(int((outcomes == MORE).sum()), len(part), alternative=alternative, confidence=confidence)
        stereo, anti = (part["direction"] == "stereo").to_numpy(), (part["direction"] == "antistereo").to_numpy()
        rows.append(
            {
                "bias_type": name,
                "n": len(part),
                "n_neutral": int((outcomes == NEUTRAL).sum()),
                "metric_score": metric_score(outcomes),
                "ci_low": 100 * test.low,
                "ci_high": 100 * test.high,
                "p_value": test.p_value,
                "stereotype_score": direction_score(outcomes, stereo),
                "n_stereo": int((stereo & (outcomes != NEUTRAL)).sum()),
                "antistereotype_score": direction_score(outcomes, anti),
                "n_antistereo": int((anti & (outcomes != NEUTRAL)).sum()),
                "alternative": alternative,
                "confidence": confidence,
                "decimals": DECIMALS,
            }
        )
    return pd.DataFrame(rows)
