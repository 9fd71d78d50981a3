"""UnStereoEval's scores (Belém et al. 2024; docs/methods.md §4): the per-pair log-likelihoods of
:func:`jaxassoc.readouts.unstereo.run_unstereo` summarised per subset (all pairs and each MaxPMI subset D_η):
US score, preference disparity and AuFC (:func:`summarize`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from jaxassoc.metrics.unstereo import DEFAULT_AUFC_UNITS, ETAS, LOG10_THRESHOLD, AufcUnits, unstereo_eval


def summarize(
    scores: pd.DataFrame,
    *,
    etas: Sequence[float] = ETAS,
    aufc_units: AufcUnits = DEFAULT_AUFC_UNITS,
    threshold: float = LOG10_THRESHOLD,
) -> pd.DataFrame:
    """One row per subset (``unconstrained`` and each η) of :func:`~jaxassoc.readouts.unstereo.run_unstereo`
    output, with every field of :class:`~jaxassoc.metrics.unstereo.UnstereoResult` and the settings used; the
    AuFC column names its unit (``aufc_log10``, ``aufc_ln``, or ``aufc_parity`` for the original code's mixed
    units)."""
    results = unstereo_eval(
        scores["M_logprob"],
        scores["F_logprob"],
        scores.get("max_gender_pmi"),
        etas=etas,
        aufc_units=aufc_units,
        threshold=threshold,
    )
    rows = [{"subset": key, **{f: r.item() for f, r in zip(res._fields, res)}} for key, res in results.items()]
    summary = pd.DataFrame(rows).rename(columns={"aufc": f"aufc_{aufc_units}"})
    summary["aufc_units"] = aufc_units
    summary["threshold_log10"] = threshold
    return summary
