"""StereoSet's LM, SS and ICAT scores (Nadeem et al. 2021; docs/methods.md §7) from the candidates' scores
(:func:`jaxassoc.readouts.stereoset.score_candidates`): per split (intrasentence, intersentence) and domain,
then ``overall`` (both splits together, all domains, as the authors).
"""

from __future__ import annotations

import pandas as pd

from jaxassoc.data.stereoset import LABELS, SPLITS
from jaxassoc.metrics.stereoset import stereoset_scores

ALL, OVERALL = "all", "overall"


def examples(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per example: split, target, bias_type and its three candidates' scores (``stereotype``,
    ``anti-stereotype``, ``unrelated``)."""
    wide = rows.pivot_table(index=["split", "example", "target", "bias_type"], columns="label", values="score")
    return wide.reset_index()[["split", "example", "target", "bias_type", *LABELS]]


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows per split and domain (``all``, then each bias type), then ``overall`` (both splits together,
    all domains, as the authors): examples, targets, LM, SS and ICAT scores."""
    wide = examples(rows)
    present = [s for s in SPLITS if (wide["split"] == s).any()]
    out = []
    for split in [*present, OVERALL]:
        part = wide if split == OVERALL else wide[wide["split"] == split]
        for domain in [ALL] if split == OVERALL else [ALL, *sorted(part["bias_type"].unique())]:
            group = part if domain == ALL else part[part["bias_type"] == domain]
            scores = stereoset_scores(
                group["stereotype"], group["anti-stereotype"], group["unrelated"], group["target"]
            )
            covers = ", ".join(present) if split == OVERALL else split
            out.append({"split": split, "domain": domain, "covers": covers, **scores._asdict()})
    return pd.DataFrame(out).rename(columns={"count": "n"})
