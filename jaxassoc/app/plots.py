"""The report's figures, each drawn from a :class:`~jaxassoc.app.spec.PlotInput` (a metric's rows, their effect
sizes, its title): the draw functions a :class:`~jaxassoc.app.spec.Plot` names (:func:`forest`,
:func:`effect_heatmap`, :func:`raw_vs_whitened`, :func:`preferences`, :func:`heads`, :func:`correlations`),
each None where the rows hold nothing to draw, and the figures they make (also callable on their own).
"""

from __future__ import annotations

import re
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from jaxassoc.app import figures, tables  # noqa: E402
from jaxassoc.app.spec import PlotInput  # noqa: E402


def natural(label: str) -> tuple:
    """W2 before W10: digit runs compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", str(label)))


def _name_key(ax, table: pd.DataFrame) -> None:
    """Under the x-axis label, what each test id stands for ("W1: Flowers/Insects x Pleasant/Unpleasant;
    ..."), when the rows carry test names."""
    if "name" not in table:
        return
    names = {t: n for t, n in zip(table["test"], table["name"]) if n and n != t}
    if names:
        text = "; ".join(f"{t}: {names[t]}" for t in sorted(names, key=natural))
        ax.annotate(textwrap.fill(text, 130), xy=(0.5, 0.0), xycoords=ax.xaxis.label, xytext=(0, -6),
                    textcoords="offset points", ha="center", va="top", fontsize=6)  # fmt: skip


def _row_label(row) -> str:
    return row["label"] + (f" [{row['series']}]" if row["series"] else "")


MARKS = "* p<.05, ** p<.01, *** p<.001"


def _reach(*values) -> float:
    """Half the width of a symmetric axis that shows every finite value with a margin."""
    return 1.08 * figures.symmetric_limit(*values)


def _clipped(values: pd.Series, reach: float) -> np.ndarray:
    """CI bounds with ±∞ (a one-sided interval) drawn to the axis edge."""
    return np.clip(values.to_numpy(dtype=float), -reach, reach)


def forest_plot(table: pd.DataFrame, title: str):
    """Effect sizes with their CIs, one line per (test, job, series), tests in order, p marks at the right;
    a one-sided CI runs to the axis edge, with an arrow head."""
    table = table.assign(row=table.apply(_row_label, axis=1))
    table = table.iloc[sorted(range(len(table)), key=lambda i: (natural(table["test"].iloc[i]), table["row"].iloc[i]))]
    rows = list(dict.fromkeys(table["row"]))
    colors = {r: plt.get_cmap("tab10")(i % 10) for i, r in enumerate(rows)}
    reach = _reach(table["effect"], table["lo"], table["hi"])
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.24 * len(table)))
    y = np.arange(len(table))[::-1]
    lo, hi = _clipped(table["lo"], reach), _clipped(table["hi"], reach)
    for k, (yi, (_, r)) in enumerate(zip(y, table.iterrows())):
        color = colors[r["row"]]
        ax.errorbar(r["effect"], yi, xerr=[[r["effect"] - lo[k]], [hi[k] - r["effect"]]], fmt="o", ms=4, color=color,
                    capsize=2, lw=1)  # fmt: skip
        for bound, edge, marker in ((r["lo"], -reach, "<"), (r["hi"], reach, ">")):
            if np.isinf(bound):
                ax.plot(edge, yi, marker=marker, color=color, ms=5, clip_on=False)
        if np.isfinite(r["p"]) and tables.stars(r["p"]):
            ax.annotate(tables.stars(r["p"]), (hi[k], yi), xytext=(4, -3), textcoords="offset points", fontsize=7)
    ax.set_xlim(-reach, reach)
    ax.set_yticks(y, [f"{t}  {r}" for t, r in zip(table["test"], table["row"])], fontsize=7)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("effect size with confidence interval")
    ax.set_title(f"{title}: effect sizes and CIs ({MARKS})", fontsize=9)
    _name_key(ax, table)
    return fig


def effect_size_heatmap(table: pd.DataFrame, title: str):
    """Jobs (and series) x tests heatmap of effect sizes, each cell with its value and significance mark
    (``*``, ``**``, ``***``); one row per job, so nothing is averaged. The colour scale is symmetric and
    covers the data (``±max |effect|``); each cell's text is black or white by the cell's luminance."""
    table = table.assign(row=table.apply(_row_label, axis=1))
    grid = table.pivot(index="row", columns="test", values="effect")
    marks = table.pivot(index="row", columns="test", values="p")
    columns = sorted(grid.columns, key=natural)
    grid, marks = grid[columns], marks.reindex(index=grid.index, columns=columns)
    values = grid.to_numpy(dtype=float)
    fig, ax = plt.subplots(figsize=(max(5.0, 3.5 + 0.7 * grid.shape[1]), max(3.0, 1.5 + 0.45 * grid.shape[0])))
    limit = figures.symmetric_limit(values)
    image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=45, ha="right")
    ax.set_yticks(range(grid.shape[0]), grid.index, fontsize=7)
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            p = marks.iloc[i, j]
            mark = tables.stars(p) if np.isfinite(p) else ""
            ax.text(j, i, f"{value:.2f}{chr(10) + mark if mark else ''}", ha="center", va="center", fontsize=7,
                    color=figures.text_colour(image.cmap(image.norm(value))))  # fmt: skip
    fig.colorbar(image, ax=ax, label=f"effect size (scale ±{limit:.2f}: the largest |value|)")
    ax.set_xlabel("test")
    ax.set_title(f"{title}: effect sizes ({MARKS})", fontsize=9)
    _name_key(ax, table)
    return fig


def raw_vs_whitened_scatter(table: pd.DataFrame, title: str = "WEAT"):
    """Effect sizes raw (x) vs ZCA-whitened (y) with their CIs as error bars, one colour and marker per job
    (the legend names its settings), each point labelled by its test; the diagonal is "whitening leaves
    d unchanged". ``table``: :func:`effects` rows with a ``label`` (raw and whitened series)."""
    pair = ["job", "test"]
    raw = table[table["series"] == "raw"].set_index(pair)
    whitened = table[table["series"] == "whitened"].set_index(pair)
    both = raw.join(whitened[["effect", "lo", "hi", "p"]], how="inner", rsuffix="_w").reset_index()
    reach = _reach(both["effect"], both["lo"], both["hi"], both["effect_w"], both["lo_w"], both["hi_w"])
    fig, ax = plt.subplots(figsize=(6.4, 5.0))
    ax.plot(
        [-reach, reach], [-reach, reach], color="grey", lw=0.8, ls="--", label="y = x: whitening leaves d unchanged"
    )
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    markers = "osD^v<>ph*"
    for k, (label, rows) in enumerate(both.groupby("label", sort=False)):
        x, y = rows["effect"].to_numpy(float), rows["effect_w"].to_numpy(float)

        def spread(lo, hi, centre):
            lo, hi = _clipped(lo, reach), _clipped(hi, reach)
            return np.nan_to_num(np.vstack([centre - lo, hi - centre]).clip(min=0))

        ax.errorbar(x, y, xerr=spread(rows["lo"], rows["hi"], x), yerr=spread(rows["lo_w"], rows["hi_w"], y),
                    fmt=markers[k % len(markers)], ms=5, capsize=2, elinewidth=0.8, color=plt.get_cmap("tab10")(k % 10),
                    label=label)  # fmt: skip
        if len(both) <= 40:
            for xi, yi, test in zip(x, y, rows["test"]):
                ax.annotate(str(test), (xi, yi), xytext=(4, 3), textcoords="offset points", fontsize=6)
    ax.set(xlim=(-reach, reach), ylim=(-reach, reach), aspect="equal")
    ax.set_xlabel("effect size d, raw (error bars: its CI)")
    ax.set_ylabel("effect size d, ZCA-whitened (error bars: its CI)")
    ax.set_title(f"{title}: effect sizes raw vs ZCA-whitened, per test and job", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), title="job", title_fontsize=7)
    return fig


FISHER_NOTE = (
    "error bars: the row's own CI, else a 95 % CI by Fisher's z from r and n (Spearman: Bonett & Wright's SE); F1: none"
)


def correlation_intervals(table: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each correlation row's CI: the row's own ``ci_low`` / ``ci_high`` when it has them, else a 95 % Fisher-z
    interval from ``correlation`` and ``n`` (:func:`jaxassoc.app.figures.correlation_ci`; none for F1)."""
    own_lo = table["ci_low"] if "ci_low" in table else pd.Series(np.nan, index=table.index)
    own_hi = table["ci_high"] if "ci_high" in table else pd.Series(np.nan, index=table.index)
    statistic = table["statistic"] if "statistic" in table else pd.Series("pearson", index=table.index)
    n = table["n"] if "n" in table else pd.Series(np.nan, index=table.index)
    lo, hi = [], []
    for r, own_l, own_h, stat, size in zip(table["correlation"], own_lo, own_hi, statistic, n):
        if pd.notna(own_l) and pd.notna(own_h):
            lo.append(float(own_l))
            hi.append(float(own_h))
        else:
            interval = figures.correlation_ci(float(r), float(size) if pd.notna(size) else np.nan, str(stat))
            lo.append(interval[0])
            hi.append(interval[1])
    return pd.Series(lo, index=table.index, dtype=float), pd.Series(hi, index=table.index, dtype=float)


def preference_plot(table: pd.DataFrame, title: str):
    """CrowS-Pairs-style shares: each group's (``bias_type``) ``metric_score`` in percent with its CI, one
    colour per job, n beside each group, and the line of no preference at 50 %."""
    groups = list(dict.fromkeys(table["bias_type"]))
    jobs = list(dict.fromkeys(table["label"]))
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.32 * len(groups) * max(1, len(jobs) / 2)))
    step = 0.7 / max(1, len(jobs))
    for k, job in enumerate(jobs):
        rows = table[table["label"] == job].set_index("bias_type").reindex(groups)
        y = np.arange(len(groups))[::-1] + 0.35 - step * (k + 0.5)
        score = rows["metric_score"].to_numpy(float)
        lo, hi = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
        ax.errorbar(score, y, xerr=[score - lo, hi - score], fmt="o", ms=4, capsize=2, lw=1, label=job,
                    color=plt.get_cmap("tab10")(k % 10))  # fmt: skip
        for yi, top, p in zip(y, hi, rows["p_value"] if "p_value" in rows else [np.nan] * len(y)):
            if np.isfinite(top) and pd.notna(p) and tables.stars(float(p)):
                ax.annotate(tables.stars(float(p)), (top, yi), xytext=(4, -3), textcoords="offset points", fontsize=7)
    ns = table.groupby("bias_type", sort=False)["n"].unique()
    ticks = [g + (f" (n = {int(ns[g][0])})" if len(ns[g]) == 1 else "") for g in groups]  # n when all jobs share it
    ax.set_yticks(np.arange(len(groups))[::-1], ticks, fontsize=7)
    ax.axvline(50, color="grey", lw=0.8)
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of pairs whose more-stereotyping sentence scores higher, with CI (50: no preference)")
    ax.set_title(f"{title}: metric score per bias type ({MARKS})", fontsize=9)
    if len(jobs) > 1:
        ax.legend(fontsize=7, loc="lower right")
    return fig


def head_effect_heatmaps(table: pd.DataFrame, title: str):
    """Causal mediation per head: each job's natural indirect and direct effects as layer × head heatmaps,
    n and the total effect in each panel's title. The indirect effects' colour scale is centred on 0 (no
    mediation); the direct effects' on the total effect, which a head that mediates nothing leaves as it is
    (Vig et al. 2020 §3), so white is "no part of the effect" in both (:func:`effect_scale`)."""
    jobs = list(dict.fromkeys(table["label"]))[:6]
    fig, axes = plt.subplots(len(jobs), 2, figsize=(8, 0.5 + 2.6 * len(jobs)), squeeze=False)
    for row, job in zip(axes, jobs):
        part = table[table["label"] == job]
        L, H = int(part["layer"].max()) + 1, int(part["head"].max()) + 1
        te, n = float(part["total_effect"].iloc[0]), int(part["n"].iloc[0])
        for ax, column, name in zip(row, ("indirect_effect", "direct_effect"), ("indirect", "direct")):
            grid = np.full((L, H), np.nan)
            grid[part["layer"].astype(int), part["head"].astype(int)] = part[column].astype(float)
            low, high = effect_scale(grid, te if name == "direct" else 0.0)
            image = ax.imshow(grid, cmap="RdBu_r", vmin=low, vmax=high, aspect="auto", origin="lower")
            ax.set_xlabel("head", fontsize=7)
            ax.set_ylabel("layer", fontsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.tick_params(labelsize=6)
            ax.set_title(f"{job}: {name} effect (n = {n}, total = {te:.3g})", fontsize=7)
            fig.colorbar(image, ax=ax, fraction=0.046, pad=0.02).ax.tick_params(labelsize=6)
    fig.suptitle(f"{title}: effect of each attention head on p(anti)/p(stereo)", fontsize=9)
    fig.tight_layout()
    return fig


def effect_scale(grid: np.ndarray, centre: float) -> tuple[float, float]:
    """``(vmin, vmax)`` of a diverging colour scale centred on ``centre``: as far either side as the value
    farthest from it (1 when all equal it)."""
    spread = float(np.nanmax(np.abs(grid - centre))) if np.isfinite(grid).any() else 0.0
    spread = spread or 1.0
    return centre - spread, centre + spread


def correlation_bars(table: pd.DataFrame, fixed: str):
    """Correlations with human judgements per benchmark (and statistic, normalisation), one bar per job,
    labelled by the job's model and varying settings (template, sample size, ...): no bar averages jobs.
    Each bar has its CI (:func:`correlation_intervals`) and its n: in the benchmark's label when its bars
    share one, else above each bar. ``fixed`` (the settings all bars share) leads the title."""
    table = table[table["correlation"].notna()].copy()
    label = table["benchmark"].astype(str)
    if "statistic" in table:
        label += " " + table["statistic"].fillna("").astype(str)
    if "normalised" in table:
        label += table["normalised"].map({False: " (no norm.)"}).fillna("")
    table["benchmark_label"] = label.str.strip()
    table["lo"], table["hi"] = correlation_intervals(table)
    table["n_shown"] = table["n"] if "n" in table else np.nan
    benchmarks = list(dict.fromkeys(table["benchmark_label"]))
    jobs = list(dict.fromkeys(table["label"]))
    width = 0.8 / len(jobs)
    fig, ax = plt.subplots(figsize=(2.5 + 1.2 * len(benchmarks) + 0.3 * len(jobs), 4.5))
    common_n = {}
    for b in benchmarks:
        ns = table.loc[table["benchmark_label"] == b, "n_shown"].dropna().unique()
        common_n[b] = int(ns[0]) if len(ns) == 1 else None
    for k, job in enumerate(jobs):
        rows = table[table["label"] == job].set_index("benchmark_label").reindex(benchmarks)
        x = np.arange(len(benchmarks)) - 0.4 + width * (k + 0.5)
        heights = rows["correlation"].to_numpy(float)
        present = np.isfinite(heights)
        ax.bar(x[present], heights[present], width * 0.92, label=job, color=plt.get_cmap("tab10")(k % 10))
        lo, hi = rows["lo"].to_numpy(float), rows["hi"].to_numpy(float)
        has = present & np.isfinite(lo) & np.isfinite(hi)
        if has.any():
            ax.errorbar(x[has], heights[has], yerr=[heights[has] - lo[has], hi[has] - heights[has]], fmt="none",
                        ecolor="black", elinewidth=0.8, capsize=2)  # fmt: skip
        for xi, h, top, b, n in zip(
            x, heights, np.where(has, np.fmax(hi, heights), heights), benchmarks, rows["n_shown"]
        ):
            if np.isfinite(h) and common_n[b] is None and pd.notna(n):
                ax.annotate(f"n={int(n)}", (xi, max(top, 0)), xytext=(0, 2), textcoords="offset points",
                            ha="center", va="bottom", fontsize=6, rotation=90)  # fmt: skip
    ticks = [b + (f"\nn = {common_n[b]}" if common_n[b] is not None else "") for b in benchmarks]
    ax.set_xticks(np.arange(len(benchmarks)), ticks, rotation=30, ha="right")
    ax.set_ylabel("correlation with human judgements (F1 for SST-2)")
    ax.axhline(0, color="grey", lw=0.5)
    low = np.nanmin(np.r_[table["lo"].to_numpy(float), table["correlation"].to_numpy(float), 0.0])
    high = np.nanmax(np.r_[table["hi"].to_numpy(float), table["correlation"].to_numpy(float), 0.0])
    ax.set_ylim(min(low, 0) - 0.05, max(high, 0) + 0.15)
    ax.legend(fontsize=7, title="one bar per job", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title("\n".join(filter(None, [fixed, FISHER_NOTE])), fontsize=8)
    return fig


def forest(inp: PlotInput):
    """:func:`forest_plot` of the effect sizes that have a CI."""
    found = inp.effects[inp.effects["lo"].notna()]
    return forest_plot(found, inp.title) if len(found) else None


def effect_heatmap(inp: PlotInput):
    """:func:`effect_size_heatmap` of every effect size."""
    return effect_size_heatmap(inp.effects, inp.title) if len(inp.effects) else None


def raw_vs_whitened(inp: PlotInput):
    """:func:`raw_vs_whitened_scatter`, where the rows have both series."""
    return (
        raw_vs_whitened_scatter(inp.effects, inp.title) if {"raw", "whitened"} <= set(inp.effects["series"]) else None
    )


def preferences(inp: PlotInput):
    """:func:`preference_plot` of the rows with a ``metric_score`` per ``bias_type`` (CrowS-Pairs)."""
    rows = inp.rows
    if not {"metric_score", "ci_low", "ci_high", "bias_type"} <= set(rows.columns):
        return None
    shares = rows[rows["metric_score"].notna() & rows["bias_type"].notna()]
    return preference_plot(shares, inp.title) if len(shares) else None


def heads(inp: PlotInput):
    """:func:`head_effect_heatmaps` of the rows of attention heads (causal mediation)."""
    rows = inp.rows
    if "component" not in rows:
        return None
    found = rows[rows["component"] == "head"]
    return head_effect_heatmaps(found, inp.title) if len(found) else None


def correlations(inp: PlotInput):
    """:func:`correlation_bars` of the rows with a correlation with human judgements."""
    rows = inp.rows
    if not ({"benchmark", "correlation"} <= set(rows.columns) and rows["correlation"].notna().any()):
        return None
    return correlation_bars(rows, inp.fixed)
