"""Compact result tables, shared by the console and the report (:mod:`jaxassoc.app.report`).

A metric's *views* split its aggregate rows into small tables (``[(title, table), ...]``), each with only
its own columns: WEAT tests apart from anisotropy and similarity rows, RPAM tests apart from the share of
positive tests, and so on (:func:`views`). :func:`present` turns a table into text cells the same way for
both: counts as integers, p-values with significance marks (:data:`LEGEND`), a confidence interval's
``ci_low*`` / ``ci_high*`` columns as one ``[lo, hi]`` column, a p below the smallest one its test can
report (``p_min``: Eq. 4's strict count reads 0) as ``<p_min``, a statistic that a row's
``undefined_reason*`` explains as ``undefined``, other missing cells empty, and no column that is empty in
every row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

View = tuple[str, pd.DataFrame]
STARS = ((0.001, "***"), (0.01, "**"), (0.05, "*"))
LEGEND = (
    "\\* p < .05, \\*\\* p < .01, \\*\\*\\* p < .001 (p as each test reports it: one-sided by default, "
    "`stats.alternative`); [lo, hi]: the bootstrap confidence interval at `stats.confidence` (default "
    "95 %; in CEAT's forest plot CES ± 1.96 SE); undefined: the statistic has no value, for the reason in "
    "`undefined_reason`"
)
P_COLUMN = re.compile(r"p(_value)?(_raw|_whitened)?")
COUNT_COLUMN = re.compile(r"n|n_.+|.+_total|words_.+|rank|seed|.+_count")
CI_LOW = re.compile(r"ci_low(.*)")
REASON = re.compile(r"undefined_reason(.*)")


def stars(p: float) -> str:
    """``***`` for p < .001, ``**`` for p < .01, ``*`` for p < .05, else ``""``."""
    return next((mark for bound, mark in STARS if p < bound), "")


def _missing(value) -> bool:
    return value is None or value is pd.NA or value == "" or (isinstance(value, float) and math.isnan(value))


def _number(value: float, count: bool) -> str:
    if count and float(value).is_integer():
        return str(int(value))
    shown = f"{value:.3f}"
    return "0.000" if shown == "-0.000" else shown


def _p_text(p: float, p_min: float | None = None) -> str:
    """p with its stars; below ``p_min`` (the smallest p its test can report) only "<p_min", starred when
    p_min itself is below a bound (then p is too)."""
    if p_min is not None and not _missing(p_min) and p < p_min * (1 - 1e-4):  # p is float32, p_min float64
        mark = next((mark for bound, mark in STARS if p_min <= bound), "")
        return f"<{p_min:.3g}" + (" " + mark if mark else "")
    return ("<0.001" if p < 0.001 else f"{p:.3f}") + (" " + stars(p) if stars(p) else "")


def present(table: pd.DataFrame) -> pd.DataFrame:
    """The table as text cells (see the module's docstring); rows and column order kept."""
    table = table.reset_index(drop=True)
    keep = [c for c in table.columns if not table[c].map(_missing).all()]
    table = table[keep]
    reasons = {REASON.fullmatch(c).group(1): table[c] for c in table.columns if REASON.fullmatch(c)}
    out, numeric = {}, set()
    for column in table.columns:
        if column == "p_min":
            continue
        if P_COLUMN.fullmatch(column) and "p_min" in table.columns:
            out[column] = ["" if _missing(p) else _p_text(float(p), m) for p, m in zip(table[column], table["p_min"])]
            numeric.add(column)
            continue
        if REASON.fullmatch(column) or column.startswith("ci_high"):
            if REASON.fullmatch(column):
                out[column] = table[column].map(lambda v: "" if _missing(v) else str(v))
            continue
        low = CI_LOW.fullmatch(column)
        if low:
            high = table.get(f"ci_high{low.group(1)}")
            numeric.add(f"ci{low.group(1)}")
            out[f"ci{low.group(1)}"] = [
                "" if high is None or _missing(lo) or _missing(hi) else f"[{lo:.3f}, {hi:.3f}]"
                for lo, hi in zip(table[column], table[column] if high is None else high)
            ]
            continue
        out[column] = [_cell(column, v) for v in table[column]]
        if pd.api.types.is_float_dtype(table[column]):
            numeric.add(column)
    shown = pd.DataFrame(out, index=table.index)
    for suffix, reason in reasons.items():  # an explained missing statistic says so
        for column in shown.columns:
            if column not in numeric or not column.endswith(suffix):
                continue
            explained = reason.map(lambda v: not _missing(v)) & (shown[column] == "")
            shown.loc[explained, column] = "undefined"
    return shown


def _cell(column: str, value) -> str:
    if _missing(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if P_COLUMN.fullmatch(column):
            return _p_text(float(value))
        return _number(float(value), bool(COUNT_COLUMN.fullmatch(column)))
    return str(value)


def has_p(table: pd.DataFrame) -> bool:
    return any(P_COLUMN.fullmatch(c) for c in table.columns)


def text(table: pd.DataFrame, max_rows: int = 40) -> str:
    """A console rendering of :func:`present` (at most ``max_rows`` rows)."""
    shown = present(table.head(max_rows))
    out = shown.to_string(index=False) if len(shown.columns) else "(no values)"
    return out + (f"\n... ({len(table) - max_rows} more rows)" if len(table) > max_rows else "")


def markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown rendering of :func:`present`."""
    shown = present(table)

    def cell(value: str) -> str:
        return str(value).replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;").replace(">", "&gt;")

    header = "| " + " | ".join(cell(c) for c in shown.columns) + " |"
    rule = "|" + "---|" * len(shown.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def console(views_: list[View]) -> str:
    """Every view as text, titled when there are several, and the significance legend when one has p."""
    parts = [(f"-- {title}\n" if title and len(views_) > 1 else "") + text(table) for title, table in views_]
    if any(has_p(table) for _, table in views_):
        parts.append("* p < .05, ** p < .01, *** p < .001")
    return "\n".join(parts)


def block(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``columns`` of ``rows`` that exist, in that order."""
    return rows[[c for c in columns if c in rows.columns]].reset_index(drop=True)


def without_provenance(aggregates: pd.DataFrame) -> pd.DataFrame:
    return aggregates[[c for c in aggregates.columns if not c.startswith("prov_")]]


def generic_views(aggregates: pd.DataFrame) -> list[View]:
    """A metric without its own views: its aggregates without provenance, as one table."""
    return [("", without_provenance(aggregates).reset_index(drop=True))]


def views_of(views: Callable[[pd.DataFrame], list[View]] | None, aggregates: pd.DataFrame) -> list[View]:
    """``views(aggregates)`` (non-empty tables only), or :func:`generic_views` for a metric without views."""
    found = (views or generic_views)(without_provenance(aggregates))
    return [(title, table) for title, table in found if len(table)]
