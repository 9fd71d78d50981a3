"""``jaxassoc-report <sweep dir>``: a Markdown report, one table of all rows and PNG plots for a sweep.

Every finished job of the sweep (a folder with ``results.json``) contributes its aggregate rows.
``report.md`` has a header (jobs, models, datasets and the settings that vary across the sweep), then one
section per metric: its compact tables (the ones the console prints, :mod:`jaxassoc.app.tables`), each row
led by the settings that vary between that metric's jobs, so nothing is averaged. Plots, one per metric:

- ``forest_<metric>.png``: effect sizes with their confidence intervals, per test and job;
- ``effect_sizes_<metric>.png``: a jobs x tests heatmap of effect sizes with significance marks;
- ``raw_vs_whitened_<metric>.png``: WEAT effect sizes raw vs ZCA-whitened;
- ``correlations_<metric>.png``: correlations with human ratings, one bar per job, labelled by its settings.

``jaxassoc-report --rank <sweep dir>`` also ranks the models per test (:func:`rank_models`), prints the
ranking and adds it to the report.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from jaxassoc.app import figures, store, tables  # noqa: E402
from jaxassoc.app.registry import get_metric  # noqa: E402
from jaxassoc.errors import ConfigError  # noqa: E402

NON_PROVENANCE = ("prov_model", "prov_metric", "prov_dataset", "prov_template", "prov_whitening", "prov_seed")
TITLES = {
    "weat": "WEAT",
    "rpam": "RPAM",
    "set": "SeT",
    "ilps": "ILPS",
    "ilps_star": "ILPS*",
    "ceat": "CEAT",
    "unstereo": "UnStereoEval",
    "intersectional": "Intersectional groups",
}
SHORT = {
    "model.name": "model",
    "dataset.name": "dataset",
    "template.name": "template",
    "whitening.name": "whitening",
    "metric.name": "metric",
    "dataset.sample": "sample",
}
# (series, effect, CI low, CI high, p): the effect sizes a test row can carry
SERIES = (
    ("raw", "d_raw", "ci_low_raw", "ci_high_raw", "p_raw"),
    ("whitened", "d_whitened", "ci_low_whitened", "ci_high_whitened", "p_whitened"),
    ("", "effect_size", "ci_low", "ci_high", "p_value"),
)
Z_95 = 1.959963984540054  # a CEAT CI: CES ± z·SE (normal, 95 %)


def gather(sweep_dir: Path) -> pd.DataFrame:
    """All finished jobs' aggregate rows, with the job folder and the key provenance columns (named
    without their ``prov_`` prefix unless a job's own column has that name). Jobs that cannot be read are
    left out (:func:`left_out` says which and why)."""
    tables_ = []
    for job, table in _readable_jobs(Path(sweep_dir))[0]:
        table = table[[c for c in table.columns if not c.startswith("prov_") or c in NON_PROVENANCE]]
        table = table.rename(
            columns={c: c.removeprefix("prov_") for c in NON_PROVENANCE if c.removeprefix("prov_") not in table.columns}
        )
        tables_.append(table.assign(job=job))
    if not tables_:
        raise SystemExit(
            f"jaxassoc-report: error: no finished job (no readable {store.RESULTS_JSON}) under {sweep_dir}"
        )
    return pd.concat(tables_, ignore_index=True)


def left_out(sweep_dir: Path) -> list[tuple[str, str]]:
    """``(job folder, why)`` for every job of the sweep the report leaves out: a folder with Hydra's record
    of a job (``.hydra/``) but no ``results.json`` (the job failed or is still running), or result files
    that cannot be read (a truncated ``results.json``, a missing or damaged ``aggregates.parquet``)."""
    return _readable_jobs(Path(sweep_dir))[1]


def _readable_jobs(sweep_dir: Path) -> tuple[list[tuple[str, pd.DataFrame]], list[tuple[str, str]]]:
    readable, skipped = [], []
    for results in sorted(sweep_dir.rglob(store.RESULTS_JSON)):
        job = str(results.parent.relative_to(sweep_dir))
        try:
            json.loads(results.read_text())["provenance"]
            readable.append((job, pd.read_parquet(results.parent / "aggregates.parquet")))
        except Exception as e:  # noqa: BLE001 - any damage leaves the job out, with its reason
            skipped.append((job, f"its results cannot be read ({type(e).__name__}: {' '.join(str(e).split())[:200]})"))
    for record in sorted(sweep_dir.rglob(".hydra")):
        if record.is_dir() and not (record.parent / store.RESULTS_JSON).exists() and not _is_audit(record):
            job = str(record.parent.relative_to(sweep_dir)) or "."
            skipped.append((job, f"no {store.RESULTS_JSON}: the job failed or has not finished"))
    return readable, sorted(skipped)


def _is_audit(record: Path) -> bool:
    """Whether Hydra's record is the default audit's own (``metric=audit``): its parts are the jobs, and it
    writes no ``results.json`` of its own."""
    try:
        return str(OmegaConf.load(record / "config.yaml").metric.name) == "audit"
    except Exception:  # noqa: BLE001 - an unreadable record is a job's, reported as such
        return False


def job_settings(sweep_dir: Path, jobs: list[str]) -> pd.DataFrame:
    """One row per job: its metric and every config value (``group.key`` columns, values as text)."""
    rows = []
    for job in jobs:
        provenance = json.loads((Path(sweep_dir) / job / store.RESULTS_JSON).read_text())["provenance"]
        flat = _flatten(provenance.get("config") or {})
        flat.setdefault("metric.name", str(provenance.get("metric", "")))
        flat.setdefault("model.name", str(provenance.get("model", "")))
        flat["seed"] = str(provenance.get("seed", ""))
        rows.append({"job": job, **flat})
    return pd.DataFrame(rows).set_index("job").fillna("")


def _flatten(config: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out |= _flatten(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value if isinstance(value, str) else json.dumps(value)
    return out


def varying(settings: pd.DataFrame) -> list[str]:
    """The settings that tell the jobs apart: those with more than one value, names first (the model's
    first), then the other ``model.*`` settings, then the rest; leaving out one
    that the settings before it already determine (``template.text`` once ``template.name`` is there)."""
    candidates = [k for k in settings.columns if settings[k].nunique() > 1]
    candidates.sort(key=lambda k: (k not in SHORT, k != "model.name", not k.startswith("model."), k))
    chosen: list[str] = []
    for key in candidates:
        if chosen and (settings.groupby(chosen)[key].nunique() <= 1).all():
            continue
        chosen.append(key)
    return chosen


def _short(value: str) -> str:
    """A path-valued setting by its last component (the model folder's name)."""
    return Path(value).name if "/" in value and not value.startswith(("[", "{")) else value


def setting_columns(settings: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The varying settings of each job as short columns (``model``, ``template``, ``metric.aufc_units``)."""
    return pd.DataFrame({SHORT.get(k, k): settings[k].map(_short) for k in keys}, index=settings.index)


def labels(settings: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per job: ``model`` (the model name and its varying ``model.*`` settings), ``setting`` (the other
    varying settings) and ``label`` (both); jobs with the same settings are told apart by their folder."""
    model_keys = [k for k in keys if k.startswith("model.") and k != "model.name"]
    other = [k for k in keys if not k.startswith("model.")]

    def join(row, names):
        return ", ".join(f"{SHORT.get(k, k)}={_short(row[k])}" for k in names)

    out = pd.DataFrame(index=settings.index)
    out["model"] = [
        " ".join([row["model.name"], *(_short(row[k]) for k in model_keys)]) for _, row in settings.iterrows()
    ]
    out["setting"] = [join(row, other) for _, row in settings.iterrows()]
    twins = out.duplicated(["model", "setting"], keep=False)  # same config in two folders: kept apart
    out.loc[twins, "model"] += " [" + out.index[twins] + "]"
    out["label"] = [m + (f" ({s})" if s else "") for m, s in zip(out["model"], out["setting"])]
    return out


def effects(rows: pd.DataFrame) -> pd.DataFrame:
    """The effect sizes of test rows in long form: ``job, test, series, effect, lo, hi, p`` (CEAT's CI:
    CES ± 1.96 SE). The unnamed series (``effect_size``) is left out where raw / whitened ones exist."""
    if "test" not in rows:
        return pd.DataFrame(columns=["job", "test", "series", "effect", "lo", "hi", "p"])
    rows = rows[rows["test"].notna()]
    parts = []
    for series, effect, low, high, p in SERIES:
        if effect not in rows:
            continue
        picked = rows[rows[effect].notna()]
        if series == "" and "d_raw" in picked:
            picked = picked[picked["d_raw"].isna()]
        lo = picked[low] if low in picked else pd.Series(np.nan, index=picked.index)
        hi = picked[high] if high in picked else pd.Series(np.nan, index=picked.index)
        if series == "" and "ces_se" in picked and low not in picked:
            lo, hi = picked[effect] - Z_95 * picked["ces_se"], picked[effect] + Z_95 * picked["ces_se"]
        parts.append(
            pd.DataFrame(
                {
                    "job": picked["job"],
                    "test": picked["test"].astype(str),
                    "series": series,
                    "effect": picked[effect].astype(float),
                    "lo": lo.astype(float),
                    "hi": hi.astype(float),
                    "p": picked[p].astype(float) if p in picked else np.nan,
                }
            )
        )
    columns = ["job", "test", "series", "effect", "lo", "hi", "p"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def _natural(label: str) -> tuple:
    """W2 before W10: digit runs compare as numbers."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", str(label)))


def _row_label(row) -> str:
    return row["label"] + (f" [{row['series']}]" if row["series"] else "")


def forest_plot(table: pd.DataFrame, title: str):
    """Effect sizes with their CIs, one line per (test, job, series), tests in order, p marks at the right."""
    table = table.assign(row=table.apply(_row_label, axis=1))
    table = table.iloc[sorted(range(len(table)), key=lambda i: (_natural(table["test"].iloc[i]), table["row"].iloc[i]))]
    rows = list(dict.fromkeys(table["row"]))
    colors = {r: plt.get_cmap("tab10")(i % 10) for i, r in enumerate(rows)}
    fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.24 * len(table)))
    y = np.arange(len(table))[::-1]
    for yi, (_, r) in zip(y, table.iterrows()):
        ax.errorbar(
            r["effect"],
            yi,
            xerr=[[r["effect"] - r["lo"]], [r["hi"] - r["effect"]]],
            fmt="o",
            ms=4,
            color=colors[r["row"]],
            capsize=2,
            lw=1,
        )
        if np.isfinite(r["p"]) and tables.stars(r["p"]):
            ax.annotate(tables.stars(r["p"]), (r["hi"], yi), xytext=(4, -3), textcoords="offset points", fontsize=7)
    ax.set_yticks(y, [f"{t}  {r}" for t, r in zip(table["test"], table["row"])], fontsize=7)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("effect size with confidence interval")
    ax.set_title(f"{title}: effect sizes and CIs (* p<.05, ** p<.01, *** p<.001)", fontsize=9)
    fig.tight_layout()
    return fig


def effect_size_heatmap(table: pd.DataFrame, title: str):
    """Jobs (and series) x tests heatmap of effect sizes, each cell with its value and significance mark;
    one row per job, so nothing is averaged."""
    table = table.assign(row=table.apply(_row_label, axis=1))
    grid = table.pivot(index="row", columns="test", values="effect")
    marks = table.pivot(index="row", columns="test", values="p")
    columns = sorted(grid.columns, key=_natural)
    grid, marks = grid[columns], marks.reindex(index=grid.index, columns=columns)
    fig, ax = plt.subplots(figsize=(max(5.0, 3.5 + 0.7 * grid.shape[1]), max(3.0, 1.5 + 0.45 * grid.shape[0])))
    limit = float(np.nanmax(np.abs(grid.to_numpy()))) or 1.0
    image = ax.imshow(grid.to_numpy(dtype=float), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=45, ha="right")
    ax.set_yticks(range(grid.shape[0]), grid.index, fontsize=7)
    for (i, j), value in np.ndenumerate(grid.to_numpy(dtype=float)):
        if np.isfinite(value):
            p = marks.iloc[i, j]
            mark = tables.stars(p) if np.isfinite(p) else ""
            ax.text(
                j,
                i,
                f"{value:.2f}{chr(10) + mark if mark else ''}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if abs(value) > 0.6 * limit else "black",
            )
    fig.colorbar(image, ax=ax, label="effect size")
    ax.set_title(f"{title}: effect sizes (* p<.05, ** p<.01, *** p<.001)", fontsize=9)
    fig.tight_layout()
    return fig


def raw_vs_whitened_scatter(table: pd.DataFrame):
    """WEAT d raw vs whitened, one colour per job (labelled by its varying settings)."""
    fig, ax = plt.subplots(figsize=(5.0, 4.5))
    for label, rows in table.groupby("label", sort=False):
        ax.scatter(rows["effect_size_raw"], rows["effect_size_whitened"], label=label, s=18)
    lim = 2.1
    ax.plot([-lim, lim], [-lim, lim], color="grey", lw=0.8)
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("d raw")
    ax.set_ylabel("d whitened")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def correlation_bars(table: pd.DataFrame, fixed: str):
    """Correlations with human judgements per benchmark (and statistic, normalisation), one bar per job,
    labelled by the job's model and varying settings (template, sample size, ...): no bar averages jobs.
    ``fixed`` (the settings all bars share) is the title."""
    table = table[table["correlation"].notna()].copy()
    label = table["benchmark"].astype(str)
    if "statistic" in table:
        label += " " + table["statistic"].fillna("").astype(str)
    if "normalised" in table:
        label += table["normalised"].map({False: " (no norm.)"}).fillna("")
    table["benchmark_label"] = label.str.strip()
    grid = table.pivot(index="benchmark_label", columns="label", values="correlation")
    fig, ax = plt.subplots(figsize=(2.5 + 1.2 * grid.shape[0] + 0.3 * grid.shape[1], 4.5))
    grid.plot.bar(ax=ax, rot=30)
    plt.setp(ax.get_xticklabels(), ha="right")
    ax.set_xlabel("")
    ax.set_ylabel("correlation with human judgements")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7, title="one bar per job", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(fixed, fontsize=8)
    fig.tight_layout()
    return fig


def rank_models(effects_: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """WEFE-style ranking. Within each (metric, series, setting) and test, the models are ranked by the
    absolute effect size, ascending: rank 1 is the smallest |effect| (the least biased model), as WEFE
    ranks absolute metric values; tied models share the mean of their ranks. Returns the per-test ranks
    (``effects_`` with ``abs_effect`` and ``rank``; undefined effects left out) and the overall table: each
    model's mean rank over the tests it has a defined effect in (``tests``), best first."""
    keys = ["metric", "series", "setting"]
    ranked = effects_[effects_["effect"].notna()].assign(abs_effect=lambda f: f["effect"].abs())
    ranked["rank"] = ranked.groupby([*keys, "test"])["abs_effect"].rank(method="average", ascending=True)
    overall = (
        ranked.groupby([*keys, "model"], sort=False)["rank"]
        .agg(mean_rank="mean", tests="size")
        .reset_index()
        .sort_values([*keys, "mean_rank", "model"], kind="stable", ignore_index=True)
    )
    return ranked.reset_index(drop=True), overall


def ranking_tables(ranked: pd.DataFrame, overall: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Per (metric, series, setting): tests x models cells ``rank: effect [lo, hi]``, then the mean ranks."""
    out = []
    for (metric, series, setting), rows in ranked.groupby(["metric", "series", "setting"], sort=False):
        title = " ".join(filter(None, [TITLES.get(metric, metric), series, f"({setting})" if setting else ""]))
        cell = rows.apply(
            lambda r: (
                f"{r['rank']:g}: {r['effect']:.3f}"
                + (f" [{r['lo']:.3f}, {r['hi']:.3f}]" if np.isfinite(r["lo"]) and np.isfinite(r["hi"]) else "")
            ),
            axis=1,
        )
        wide = rows.assign(cell=cell).pivot(index="test", columns="model", values="cell").fillna("undefined")
        wide = wide.loc[sorted(wide.index, key=_natural)].reset_index()
        wide.columns.name = None
        mean = overall[(overall["metric"] == metric) & (overall["series"] == series) & (overall["setting"] == setting)]
        out.append((f"{title}: rank by |effect size| (1 = smallest)", wide))
        out.append((f"{title}: mean rank", mean[["model", "mean_rank", "tests"]].reset_index(drop=True)))
    return out


def _save(out: Path, name: str, fig) -> str:
    """Write the figure as ``name`` (PNG) and its PDF and SVG (:func:`jaxassoc.app.figures.save`)."""
    figures.save(fig, out / name)
    return name


def _views(metric: str):
    try:
        return get_metric(metric).views
    except ConfigError:  # a plugin metric this process cannot load: its aggregates as they are
        return None


def metric_section(metric: str, rows: pd.DataFrame, settings: pd.DataFrame, sweep_dir: Path, out: Path) -> list[str]:
    """``report.md`` lines of one metric: its settings, compact tables (from each job's stored aggregates)
    and plots (written into ``out``)."""
    keys = [k for k in varying(settings) if k != "metric.name"]
    lead = setting_columns(settings, keys)
    title = TITLES.get(metric, metric)
    lines = [f"## {title} (`metric={metric}`)", "", _settings_line(settings, keys), ""]
    blocks: dict[str, list[pd.DataFrame]] = {}
    view_fn = _views(metric)
    for job in settings.index:
        for name, table in tables.views_of(view_fn, pd.read_parquet(sweep_dir / job / "aggregates.parquet")):
            front = pd.DataFrame({c: [lead.loc[job, c]] * len(table) for c in lead.columns})
            blocks.setdefault(name, []).append(pd.concat([front, table.reset_index(drop=True)], axis=1))
    for name, parts in blocks.items():
        lines += ([f"### {name}", ""] if name else []) + [tables.markdown(pd.concat(parts, ignore_index=True)), ""]
    plots = _metric_plots(metric, rows, settings, keys, out)
    lines += [f"![{name}]({name})" for name in plots] + ([""] if plots else [])
    return lines


def _settings_line(settings: pd.DataFrame, keys: list[str]) -> str:
    fixed = [k for k in ("model.name", "dataset.name", "template.name", "whitening.name") if k not in keys]
    parts = [f"{len(settings)} job(s)"]
    parts += [f"{SHORT[k]}: {', '.join(sorted(set(settings[k].map(_short))))}" for k in fixed if k in settings]
    if keys:
        parts.append("varying: " + ", ".join(f"`{k}`" for k in keys))
    return " · ".join(parts)


def _metric_plots(metric: str, rows: pd.DataFrame, settings: pd.DataFrame, keys: list[str], out: Path) -> list[str]:
    title = TITLES.get(metric, metric)
    named = labels(settings, keys)
    rows = rows.join(named[["label"]], on="job")
    found = effects(rows).join(named[["label"]], on="job")
    plots = []
    if found["lo"].notna().any():
        plots.append(_save(out, f"forest_{metric}.png", forest_plot(found[found["lo"].notna()], title)))
    if len(found):
        plots.append(_save(out, f"effect_sizes_{metric}.png", effect_size_heatmap(found, title)))
    if {"effect_size_raw", "effect_size_whitened"} <= set(rows.columns) and rows["effect_size_whitened"].notna().any():
        plots.append(_save(out, f"raw_vs_whitened_{metric}.png", raw_vs_whitened_scatter(rows)))
    if {"benchmark", "correlation"} <= set(rows.columns) and rows["correlation"].notna().any():
        fixed = [
            f"{SHORT[k]}={_short(settings[k].iloc[0]).replace('null', 'all')}"
            for k in ("template.name", "dataset.sample")
            if k in settings and k not in keys
        ]
        plots.append(_save(out, f"correlations_{metric}.png", correlation_bars(rows, ", ".join(fixed))))
    return plots


def sweep_effects(table: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """Every metric's effect sizes with the job's ``metric``, ``model``, ``setting`` (labels per metric)."""
    parts = []
    for metric, metric_settings in settings.groupby("metric.name", sort=False):
        keys = [k for k in varying(metric_settings) if k != "metric.name"]
        found = effects(table[table["job"].isin(metric_settings.index)])
        parts.append(found.join(labels(metric_settings, keys), on="job").assign(metric=metric))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def write_report(sweep_dir: Path, rank: bool = False) -> Path:
    """Gather the sweep, write ``report/`` (table, report.md, plots; with ``rank`` the model ranking,
    also in ``ranking.csv``) inside it; returns the folder."""
    sweep_dir = Path(sweep_dir)
    table = gather(sweep_dir)
    jobs = list(dict.fromkeys(table["job"]))
    settings = job_settings(sweep_dir, jobs)
    out = sweep_dir / "report"
    store.write_table(out, "table", table)
    keys = varying(settings)
    lines = [
        f"# jaxassoc report: {sweep_dir.resolve().name}",
        "",
        _settings_line(settings, keys)
        + " · metrics: "
        + ", ".join(f"{TITLES.get(m, m)}" for m in dict.fromkeys(settings["metric.name"])),
        "",
        f"Legend: {tables.LEGEND}. Every table row is one job's; the first columns name the settings that "
        "vary between the jobs of that metric.",
        "",
    ]
    for metric, metric_settings in settings.groupby("metric.name", sort=False):
        rows = table[table["job"].isin(metric_settings.index)]
        lines += metric_section(metric, rows, metric_settings, sweep_dir, out)
    skipped = left_out(sweep_dir)
    if skipped:
        print(
            f"jaxassoc-report: {len(skipped)} job(s) left out:", *(f"  {job}: {why}" for job, why in skipped), sep="\n"
        )
        lines += ["## Jobs left out", "", *(f"- `{job}`: {why}" for job, why in skipped), ""]
    if rank:
        lines += ranking_lines(table, settings, out)
    text = "\n".join(lines) + "\n"
    store.atomic_write(out / "report.md", lambda p: p.write_text(text))
    store.atomic_write(out / "jobs.json", lambda p: p.write_text(json.dumps(sorted(jobs))))
    return out


def ranking_lines(table: pd.DataFrame, settings: pd.DataFrame, out: Path) -> list[str]:
    """The ranking section of ``report.md``; writes ``ranking.csv`` (per-test ranks) and prints the tables."""
    ranked, overall = rank_models(sweep_effects(table, settings))
    if ranked.empty:
        print("ranking: no test with an effect size in this sweep")
        return ["## Ranking of models", "", "No test with an effect size in this sweep.", ""]
    store.write_table(out, "ranking", ranked.drop(columns=["label"]))
    lines = [
        "## Ranking of models",
        "",
        "Per test, models ranked by |effect size| ascending (1 = least biased, as WEFE ranks absolute "
        "values); ties share their mean rank; cells: `rank: effect [CI]`. Mean rank over the tests "
        "with a defined effect (`tests`).",
        "",
    ]
    for title, shown in ranking_tables(ranked, overall):
        print(f"\n-- {title}\n{tables.text(shown, max_rows=200)}")
        lines += [f"### {title}", "", tables.markdown(shown), ""]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="jaxassoc-report", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="a Hydra sweep folder (or any folder of finished jobs)")
    parser.add_argument(
        "--rank",
        action="store_true",
        help="rank the models per test by |effect size| (WEFE-style) and add it to the report",
    )
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        sys.exit(f"jaxassoc-report: error: {args.sweep_dir} is not a folder")
    print(f"report: {write_report(args.sweep_dir, rank=args.rank)}")


if __name__ == "__main__":
    main()
