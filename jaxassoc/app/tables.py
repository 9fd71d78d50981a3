"""Compact result tables, shared by the console and the report (:mod:`jaxassoc.app.report`).

A metric's *views* split its aggregate rows into small tables (``[(title, table), ...]``), each with only
its own columns: WEAT tests apart from anisotropy and similarity rows, RPAM tests apart from the share of
positive tests, and so on (:func:`views`). :func:`present` turns a table into text cells the same way for
both: counts as integers, p-values with significance marks (:data:`LEGEND`), a confidence interval's
``ci_low*`` / ``ci_high*`` columns as one ``[lo, hi]`` column, a p below the smallest one its test can
report (``p_min``: Eq. 4's strict count reads 0) as ``<p_min``, a statistic that a row's
``undefined_reason*`` explains as ``undefined``, other missing cells empty, and no column that is empty in
every row. A one-sided CI reads ``[lo, ∞)`` or ``(−∞, hi]``.

A view's table can carry notes (``table.attrs["notes"]``: how its p and CI were computed, its
multiple-comparison correction) that :func:`console` and :func:`markdown` print under it; :func:`views_of`
adds the correction (``stats.correction``: a ``<p>_holm`` or ``<p>_bh`` column beside each p column, over
the tests of that table; docs/methods.md §5.9) or says that the p-values are not corrected.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from jaxassoc.stats import multiple

View = tuple[str, pd.DataFrame]
STARS = ((0.001, "***"), (0.01, "**"), (0.05, "*"))
LEGEND = (
    "\\* p < .05, \\*\\* p < .01, \\*\\*\\* p < .001 (p two-sided by default, `stats.alternative`; each table's "
    "note says how its p and CI were computed); [lo, hi]: the bootstrap confidence interval at `stats.confidence` "
    "(default 95 %), two-sided beside a two-sided p and one-sided ([lo, ∞) or (−∞, hi]) beside a one-sided p, "
    "so a star and a CI excluding 0 agree up to Monte Carlo error (in CEAT's forest plot CES ± 1.96 SE); "
    "undefined: the statistic has no value, for the reason in `undefined_reason`"
)
P_COLUMN = re.compile(r"p(_value)?(_raw|_whitened)?(_holm|_bh)?")
TEST_P_COLUMN = re.compile(r"p(_value)?(_raw|_whitened)?")
COUNT_COLUMN = re.compile(r"n|n_.+|.+_total|words_.+|rank|seed|.+_count")
CI_LOW = re.compile(r"ci_low(.*)")
REASON = re.compile(r"undefined_reason(.*)")
TEST_DESIGN = ["test", "name", "n_x", "n_y", "n_a", "n_b", "lost_words"]
"""The leading columns of a WEAT-style test table: the test, its name, the set sizes and the lost words."""
SIDES = {"two-sided": "two-sided", "greater": "one-sided (greater)", "less": "one-sided (less)"}


def stars(p: float) -> str:
    """``***`` for p < .001, ``**`` for p < .01, ``*`` for p < .05, else ``""``."""
    return next((mark for bound, mark in STARS if p < bound), "")


def _missing(value) -> bool:
    return value is None or value is pd.NA or value == "" or (isinstance(value, float) and math.isnan(value))


def _number(value: float, count: bool) -> str:
    """A count as an integer; a value as 3 decimals from 0.01 up (``0.123``, ``12.345``), with 3
    significant digits below (``0.00123``, ``1.23e-05``: a tiny effect never reads ``0.000``), ``0`` for 0."""
    if count and float(value).is_integer():
        return str(int(value))
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    if abs(value) >= 0.01:
        return f"{value:.3f}"
    return f"{value:.3g}" if abs(value) >= 1e-4 else f"{value:.2e}"


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
                "" if high is None or _missing(lo) or _missing(hi) else interval(lo, hi)
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


def interval(lo: float, hi: float) -> str:
    """``[lo, hi]``; a one-sided interval ``[lo, ∞)`` or ``(−∞, hi]``; "" when a bound is missing (NaN)."""
    if _missing(lo) or _missing(hi):
        return ""
    left = "(−∞" if np.isneginf(lo) else f"[{_number(lo, False)}"
    right = "∞)" if np.isposinf(hi) else f"{_number(hi, False)}]"
    return f"{left}, {right}"


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
    out += f"\n... ({len(table) - max_rows} more rows)" if len(table) > max_rows else ""
    return "\n".join([out, *(f"  note: {n}" for n in notes(table))])


def markdown(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown rendering of :func:`present`."""
    shown = present(table)

    def cell(value: str) -> str:
        return str(value).replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;").replace(">", "&gt;")

    header = "| " + " | ".join(cell(c) for c in shown.columns) + " |"
    rule = "|" + "---|" * len(shown.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    notes_ = [line for n in notes(table) for line in ("", f"_Note: {cell(n)}_")]  # a paragraph each
    return "\n".join([header, rule, *rows, *notes_])


def notes(table: pd.DataFrame) -> list[str]:
    """The table's notes (``table.attrs["notes"]``), in order."""
    return list(table.attrs.get("notes", []))


def with_notes(table: pd.DataFrame, *new: str) -> pd.DataFrame:
    """``table`` with ``new`` notes appended (a note it already has is not repeated)."""
    table.attrs["notes"] = list(dict.fromkeys([*notes(table), *(n for n in new if n)]))
    return table


def concat(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows of ``parts`` as one table, with the notes of every part (each once)."""
    return with_notes(pd.concat(parts, ignore_index=True), *(n for part in parts for n in notes(part)))


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


def views_of(
    views: Callable[[pd.DataFrame], list[View]] | None, aggregates: pd.DataFrame, correction: str | None = None
) -> list[View]:
    """``views(aggregates)`` (non-empty tables only), or :func:`generic_views` for a metric without views,
    each with its multiple-comparison correction (:func:`corrected`). ``correction`` (``none``, ``holm``,
    ``bh``): None reads the job's ``stats.correction`` from its recorded config (``prov_config``)."""
    if correction is None:
        correction = recorded_correction(aggregates)
    found = (views or generic_views)(without_provenance(aggregates))
    return [(title, corrected(table, correction)) for title, table in found if len(table)]


def recorded_correction(aggregates: pd.DataFrame) -> str:
    """``stats.correction`` of the job whose rows these are (its ``prov_config``), else ``none``."""
    if "prov_config" not in aggregates or not len(aggregates):
        return "none"
    try:
        return str(json.loads(aggregates["prov_config"].iloc[0]).get("stats", {}).get("correction", "none"))
    except (TypeError, ValueError):
        return "none"


NOT_CORRECTED = "p not corrected for the {m} tests of this table (stats.correction=holm or bh adds the adjusted column)"
ADJUSTED = re.compile(r"^(.*: .*) over the (\d+) tests of this table$")


def _p_columns(table: pd.DataFrame) -> list[str]:
    """The test p columns of ``table`` that hold two or more p-values."""
    return [c for c in table.columns if TEST_P_COLUMN.fullmatch(c) and table[c].notna().sum() >= 2]


def n_tests(table: pd.DataFrame) -> int:
    """How many tests ``table`` reports: the p-values of its fullest test p column."""
    return max((int(table[c].notna().sum()) for c in _p_columns(table)), default=0)


def concat_jobs(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The tables of several jobs as one (the report's), with their notes; the count of tests in a note
    on the multiple-comparison correction is the merged table's, and an adjustment made within each job
    says so (each job adjusted over its own tests, not over the table's)."""
    merged = concat(parts)
    if len(parts) < 2:
        return merged
    m, notes_ = n_tests(merged), []
    for note in notes(merged):
        adjusted = ADJUSTED.match(note)
        if note.startswith(NOT_CORRECTED.split("{m}")[0]):
            note = NOT_CORRECTED.format(m=m)
        elif adjusted:
            note = f"{adjusted[1]} within each job's tests ({len(parts)} jobs, {m} tests in this table)"
        notes_.append(note)
    merged.attrs["notes"] = list(dict.fromkeys(notes_))
    return merged


def corrected(table: pd.DataFrame, correction: str) -> pd.DataFrame:
    """The table with a ``<p>_holm`` / ``<p>_bh`` column after each test p column (``p``, ``p_value``,
    ``p_raw``, ``p_whitened``) that holds two or more p-values, adjusted over them
    (:mod:`jaxassoc.stats.multiple`), and a note saying so; with ``correction="none"``, a note that the
    p-values are not corrected for the number of tests."""
    columns = _p_columns(table)
    if not columns:
        return table
    m = n_tests(table)
    if correction == "none":
        return with_notes(table, NOT_CORRECTED.format(m=m))
    out, suffix = table.copy(), multiple.COLUMN_SUFFIX[correction]
    for column in columns:
        adjusted = multiple.adjust(out[column].to_numpy(dtype=float), correction)
        out.insert(out.columns.get_loc(column) + 1, column + suffix, adjusted)
    what = {"holm": "Holm-adjusted (family-wise error)", "bh": "Benjamini–Hochberg q (false discovery rate)"}
    return with_notes(
        out, f"{', '.join(c + suffix for c in columns)}: {what[correction]} over the {m} tests of this table"
    )


def permutations(rows: pd.DataFrame, suffix: str = "") -> pd.Series:
    """How each row's permutation p was counted: ``exact (12,870)`` (every partition) or ``100,000 random``."""
    exact, count = rows.get(f"p_exact{suffix}"), rows.get(f"p_resamples{suffix}")
    if exact is None or count is None:
        return pd.Series("", index=rows.index)
    return pd.Series(
        [
            "" if _missing(n) else (f"exact ({int(n):,})" if bool(e) else f"{int(n):,} random")
            for e, n in zip(exact, count)
        ],
        index=rows.index,
    )


def test_note(rows: pd.DataFrame, statistic: str = "d", resampled: str = "") -> str:
    """How the rows' p and CI were computed, from their ``alternative``, ``confidence`` and ``n_bootstrap``:
    e.g. "p: two-sided permutation test (column permutations); CI of d: two-sided 95 % percentile
    bootstrap, 10,000 resamples of the targets within X and Y"."""

    def values(column: str) -> str:
        found = [v for v in dict.fromkeys(rows[column]) if not _missing(v)] if column in rows else []
        return " / ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in found)

    sides = " / ".join(SIDES.get(v, v) for v in (values("alternative") or "two-sided").split(" / "))
    parts = [f"p: {sides} permutation test (column permutations: exact or random)"]
    if "confidence" in rows and "n_bootstrap" in rows:
        level = " / ".join(f"{float(v) * 100:g} %" for v in dict.fromkeys(rows["confidence"].dropna()))
        parts.append(
            f"CI of {statistic}: {sides} {level} percentile bootstrap, "
            + " / ".join(f"{int(v):,}" for v in dict.fromkeys(rows["n_bootstrap"].dropna()))
            + " resamples"
            + (f" {resampled}" if resampled else "")
        )
    return "; ".join(parts)
