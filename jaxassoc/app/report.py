"""``jaxassoc-report <sweep dir>``: one table, a Markdown report and PNG plots for a whole sweep.

Every finished job of the sweep (a folder with ``results.json``) contributes its aggregate rows. The
plots read the column conventions that the built-in pipelines follow in their aggregate tables:

- ``test`` + ``effect_size``: a heatmap of effect sizes, models x tests;
- ``effect_size_raw`` + ``effect_size_whitened``: a raw-vs-whitened scatter;
- ``benchmark`` + ``correlation``: bars of correlations with human judgements per model.
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

from jaxassoc.app import store  # noqa: E402

NON_PROVENANCE = ("prov_model", "prov_metric", "prov_dataset", "prov_template", "prov_whitening", "prov_seed")


def gather(sweep_dir: Path) -> pd.DataFrame:
    """All finished jobs' aggregate rows, with the job folder and the key provenance columns (named
    without their ``prov_`` prefix unless a job's own column has that name)."""
    tables = []
    for results in sorted(Path(sweep_dir).rglob(store.RESULTS_JSON)):
        table = pd.read_parquet(results.parent / "aggregates.parquet")
        table = table[[c for c in table.columns if not c.startswith("prov_") or c in NON_PROVENANCE]]
        table = table.rename(columns={c: c.removeprefix("prov_") for c in NON_PROVENANCE
                                      if c.removeprefix("prov_") not in table.columns})
        tables.append(table.assign(job=str(results.parent.relative_to(sweep_dir))))
    if not tables:
        raise SystemExit(f"jaxassoc-report: error: no finished job (no {store.RESULTS_JSON}) under {sweep_dir}")
    return pd.concat(tables, ignore_index=True)


def effect_size_heatmap(table: pd.DataFrame):
    """Models x tests heatmap of effect sizes (one panel; mean over other settings, noted in the title)."""
    grid = table.pivot_table(index="model", columns="test", values="effect_size", aggfunc="mean")
    grid = grid[sorted(grid.columns, key=_natural)]
    fig, ax = plt.subplots(figsize=(max(5.0, 2.5 + 0.7 * grid.shape[1]), max(3.0, 1.5 + 0.5 * grid.shape[0])))
    limit = float(np.nanmax(np.abs(grid.to_numpy()))) or 1.0
    image = ax.imshow(grid.to_numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=45, ha="right")
    ax.set_yticks(range(grid.shape[0]), grid.index)
    for (i, j), value in np.ndenumerate(grid.to_numpy()):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, label="effect size d")
    ax.set_title("Effect sizes (mean over the sweep's other settings)")
    fig.tight_layout()
    return fig


def _natural(label: str) -> tuple:
    """W2 before W10: digit runs compare as numbers."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(label)))


def raw_vs_whitened_scatter(table: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    for model, rows in table.groupby("model"):
        ax.scatter(rows["effect_size_raw"], rows["effect_size_whitened"], label=model, s=18)
    lim = 2.1
    ax.plot([-lim, lim], [-lim, lim], color="grey", lw=0.8)
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("d raw")
    ax.set_ylabel("d whitened")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def correlation_bars(table: pd.DataFrame):
    """Correlations with human judgements per benchmark (and statistic / setting), one bar per model."""
    table = table[table["correlation"].notna()].copy()
    label = table["benchmark"].astype(str)
    if "statistic" in table:
        label += " " + table["statistic"].fillna("").astype(str)
    if "normalised" in table:
        label += table["normalised"].map({False: " (no norm.)"}).fillna("")
    table["label"] = label.str.strip()
    grid = table.pivot_table(index="label", columns="model", values="correlation", aggfunc="mean")
    fig, ax = plt.subplots(figsize=(2.5 + 1.2 * grid.shape[0], 4.5))
    grid.plot.bar(ax=ax, rot=30)
    plt.setp(ax.get_xticklabels(), ha="right")
    ax.set_xlabel("")
    ax.set_ylabel("correlation with human judgements")
    ax.axhline(0, color="grey", lw=0.5)
    fig.tight_layout()
    return fig


def markdown_table(table: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table, floats to 3 decimals."""

    def cell(value) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value).replace("|", "\\|")

    header = "| " + " | ".join(map(str, table.columns)) + " |"
    rule = "|" + "---|" * len(table.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def write_report(sweep_dir: Path) -> Path:
    """Gather the sweep, write ``report/`` (table, report.md, plots) inside it; returns the folder."""
    sweep_dir = Path(sweep_dir)
    table = gather(sweep_dir)
    out = sweep_dir / "report"
    store.write_table(out, "table", table)
    plots = []
    if {"test", "effect_size", "model"} <= set(table.columns) and table["effect_size"].notna().any():
        plots.append(("effect_sizes.png", effect_size_heatmap(table)))
    if {"effect_size_raw", "effect_size_whitened", "model"} <= set(table.columns):
        plots.append(("raw_vs_whitened.png", raw_vs_whitened_scatter(table)))
    if {"benchmark", "correlation", "model"} <= set(table.columns) and table["correlation"].notna().any():
        plots.append(("correlations.png", correlation_bars(table)))
    for name, fig in plots:
        store.atomic_write(out / name, lambda p, f=fig: f.savefig(p, format="png", dpi=120))
        plt.close(fig)
    jobs = table["job"].nunique()
    lines = [f"# jaxassoc sweep report: {sweep_dir.name}", "", f"{jobs} finished jobs, {len(table)} rows.", ""]
    lines += [f"![{name}]({name})" for name, _ in plots]
    lines += ["", markdown_table(table.drop(columns=["job"]))]
    text = "\n".join(lines) + "\n"
    store.atomic_write(out / "report.md", lambda p: p.write_text(text))
    store.atomic_write(out / "jobs.json", lambda p: p.write_text(json.dumps(sorted(table["job"].unique()))))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="jaxassoc-report", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="a Hydra sweep folder (or any folder of finished jobs)")
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        sys.exit(f"jaxassoc-report: error: {args.sweep_dir} is not a folder")
    print(f"report: {write_report(args.sweep_dir)}")


if __name__ == "__main__":
    main()
