"""``jaxassoc-report <sweep dir>``: a Markdown and an HTML report, one table of all rows and figures for a sweep.

Every finished job of the sweep (a folder with ``results.json``) contributes its aggregate rows.
``report.md`` has a header (jobs, models, datasets and the settings that vary across the sweep), then one
section per metric: its compact tables (the ones the console prints, :mod:`jaxassoc.app.tables`), each row
led by the settings that vary between that metric's jobs, so nothing is averaged. ``report.html``
(:mod:`jaxassoc.app.report_html`) is the same report as one self-contained page, with sortable tables, the
figures embedded and each job's provenance. Each metric's section is what its spec
(:class:`~jaxassoc.app.spec.MetricSpec`) declares: its title, compact tables (``views``) and figures (``plots``,
drawn by :mod:`jaxassoc.app.plots` from its rows and the effect sizes its ``effects`` locate), each as PNG, PDF
and SVG (:func:`jaxassoc.app.figures.save`): e.g. ``forest_<metric>``, ``effect_sizes_<metric>``,
``raw_vs_whitened_<metric>``, ``scores_<metric>``, ``heads_<metric>``, ``correlations_<metric>``.

``jaxassoc-report --rank <sweep dir>`` also ranks the models per test (:func:`rank_models`: only across
models, with the ranks their CIs allow), prints the ranking and adds it to the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NamedTuple

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from jaxassoc.app import figures, plots, store, tables  # noqa: E402
from jaxassoc.app import report_html as doc  # noqa: E402
from jaxassoc.app.config import MetricConfig  # noqa: E402
from jaxassoc.app.console import closes_quietly  # noqa: E402
from jaxassoc.app.registry import get_metric  # noqa: E402
from jaxassoc.app.spec import Effects, MetricSpec, PlotInput, resolve  # noqa: E402
from jaxassoc.errors import ConfigError  # noqa: E402

NON_PROVENANCE = (
    "prov_model",
    "prov_metric",
    "prov_dataset",
    "prov_template",
    "prov_whitening",
    "prov_seed",
    "prov_model_precision",
    "prov_intervention_label",
)
SHORT = {
    "model.name": "model",
    "dataset.name": "dataset",
    "template.name": "template",
    "whitening.name": "whitening",
    "metric.name": "metric",
    "dataset.sample": "sample",
    "intervention.name": "intervention",
}
Z_95 = 1.959963984540054  # a CI from a standard error (CEAT's CES ± z·SE; normal, 95 %)


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
        flat.setdefault("intervention.name", str(provenance.get("intervention") or "none"))
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


def labels(settings: pd.DataFrame, keys: list[str], apart: bool = True) -> pd.DataFrame:
    """Per job: ``model`` (the model name and its varying ``model.*`` settings), ``setting`` (the other
    varying settings) and ``label`` (both); jobs with the same settings are told apart by their folder
    (unless ``apart=False``)."""
    model_keys = [k for k in keys if k.startswith("model.") and k != "model.name"]
    other = [k for k in keys if not k.startswith("model.")]

    def join(row, names):
        return ", ".join(f"{SHORT.get(k, k)}={_short(row[k])}" for k in names)

    out = pd.DataFrame(index=settings.index)
    out["model"] = [
        " ".join([row["model.name"], *(_short(row[k]) for k in model_keys)]) for _, row in settings.iterrows()
    ]
    out["setting"] = [join(row, other) for _, row in settings.iterrows()]
    twins = out.duplicated(["model", "setting"], keep=False) & apart  # same config in two folders: kept apart
    out.loc[twins, "model"] += " [" + out.index[twins] + "]"
    out["label"] = [m + (f" ({s})" if s else "") for m, s in zip(out["model"], out["setting"])]
    return out


def effects(rows: pd.DataFrame, series: tuple[Effects, ...]) -> pd.DataFrame:
    """The effect sizes of test rows in long form: ``job, test, series, effect, lo, hi, p, name`` (the test's
    name, "" without one), where a metric's spec says they are (``MetricSpec.effects``; a CI from a standard
    error: ± 1.96 SE). The unnamed series is left out where raw / whitened ones exist; a row's own ``series``
    column names it (WEFE's metrics: ``RND (A)``, ``MAC``)."""
    if "test" not in rows:
        return pd.DataFrame(columns=["job", "test", "series", "effect", "lo", "hi", "p", "name"])
    rows = rows[rows["test"].notna()]
    parts = []
    for name, effect, low, high, p, se in series:
        if effect not in rows:
            continue
        picked = rows[rows[effect].notna()]
        if name == "" and "d_raw" in picked:
            picked = picked[picked["d_raw"].isna()]
        lo = picked[low] if low in picked else pd.Series(np.nan, index=picked.index)
        hi = picked[high] if high in picked else pd.Series(np.nan, index=picked.index)
        if se is not None and se in picked and low not in picked:
            lo, hi = picked[effect] - Z_95 * picked[se], picked[effect] + Z_95 * picked[se]
        parts.append(
            pd.DataFrame(
                {
                    "job": picked["job"],
                    "test": picked["test"].astype(str),
                    "series": picked["series"].fillna("").astype(str) if name == "" and "series" in picked else name,
                    "effect": picked[effect].astype(float),
                    "lo": lo.astype(float),
                    "hi": hi.astype(float),
                    "p": picked[p].astype(float) if p in picked else np.nan,
                    "name": picked["name"].fillna("").astype(str) if "name" in picked else "",
                }
            )
        )
    columns = ["job", "test", "series", "effect", "lo", "hi", "p", "name"]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


# Settings that cannot change an effect size: the permutation p and its significance level, the CI, how
# forward passes are batched and placed (equal up to floating-point rounding). A ranking is not split by them.
NO_EFFECT_SIZE = (
    "stats.exact_bound",
    "stats.n_permutations",
    "stats.alternative",
    "stats.ties",
    "stats.correction",
    "stats.alpha",
    "stats.n_bootstrap",
    "stats.confidence",
    "model.batch_size",
    "model.shard",
)
SAME_EFFECT = 1e-4  # jobs of one model whose effects differ by no more than this measured the same effect
RANK_KEYS = ["metric", "series", "setting"]


class Ranking(NamedTuple):
    """:func:`rank_models`' answer: ``ranked`` (one row per ranked model and test), ``overall`` (mean ranks)
    and ``unranked`` (effects left out: the only model of their comparison)."""

    ranked: pd.DataFrame
    overall: pd.DataFrame
    unranked: pd.DataFrame


def _one_entry_per_model(found: pd.DataFrame) -> pd.DataFrame:
    """Jobs of one model that differ only in settings that cannot change the effect (stats options, batch
    size) measured one effect: the row of the job with the most bootstrap resamples stands for them
    (``jobs`` counts them). If their effects differ all the same, each stays, named by its job folder."""
    found = found.assign(jobs=1)
    if "n_bootstrap" not in found:
        found = found.assign(n_bootstrap=np.nan)
    group = [*RANK_KEYS, "model", "test"]
    size = found.groupby(group, sort=False)["job"].transform("size")
    parts = [found[size == 1]]
    for _, rows in found[size > 1].groupby(group, sort=False):
        if rows["effect"].max() - rows["effect"].min() <= SAME_EFFECT:
            best = rows.sort_values(["n_bootstrap", "job"], ascending=[False, True], kind="stable", na_position="last")
            parts.append(best.iloc[[0]].assign(jobs=len(rows)))
        else:
            parts.append(rows.assign(model=rows["model"] + " [" + rows["job"] + "]"))
    return pd.concat(parts).sort_index(kind="stable")


def _abs_interval(effect: pd.Series, lo: pd.Series, hi: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The CI of |effect| from the CI of the effect (an interval across 0 starts at 0); without a CI, the
    point itself."""
    lo = lo.where(lo.notna(), effect).to_numpy(dtype=float)
    hi = hi.where(hi.notna(), effect).to_numpy(dtype=float)
    across = (lo <= 0) & (hi >= 0)
    return np.where(across, 0.0, np.minimum(np.abs(lo), np.abs(hi))), np.maximum(np.abs(lo), np.abs(hi))


def _rank_ranges(rows: pd.DataFrame) -> pd.DataFrame:
    """Each model's plausible ranks in one comparison: from 1 + the number of models whose |effect| CI lies
    wholly below its own, to n - the number whose CI lies wholly above (overlapping CIs: not told apart)."""
    low, high = _abs_interval(rows["effect"], rows["lo"], rows["hi"])
    below = (high[None, :] < low[:, None]).sum(axis=1)
    above = (low[None, :] > high[:, None]).sum(axis=1)
    return pd.DataFrame({"rank_best": 1 + below, "rank_worst": len(rows) - above}, index=rows.index)


def rank_models(effects_: pd.DataFrame) -> Ranking:
    """WEFE-style ranking of models. Within each comparison (metric, series, setting: the varying settings
    that can change an effect size, see :data:`NO_EFFECT_SIZE`) and test, the models are ranked by the
    absolute effect size, ascending: rank 1 is the smallest |effect| (the least biased model), as WEFE ranks
    absolute metric values; tied models share the mean of their ranks. ``rank_best``..``rank_worst`` is
    the range of ranks the CIs allow (:func:`_rank_ranges`): models whose |effect| CIs overlap are not told
    apart. A comparison with one model is not ranked (``unranked``). ``overall``: each model's mean rank
    over the tests it has a defined effect in (``tests``) and the number of those where no model is
    clearly less biased (``could_be_1st``), best first."""
    found = _one_entry_per_model(effects_[effects_["effect"].notna()])
    models = found.groupby([*RANK_KEYS, "test"], sort=False)["model"].transform("nunique")
    unranked = found[models < 2].reset_index(drop=True)
    ranked = found[models >= 2].assign(abs_effect=lambda f: f["effect"].abs())
    ranked["rank"] = ranked.groupby([*RANK_KEYS, "test"])["abs_effect"].rank(method="average", ascending=True)
    ranges = [_rank_ranges(rows) for _, rows in ranked.groupby([*RANK_KEYS, "test"], sort=False)]
    ranked = ranked.join(pd.concat(ranges) if ranges else pd.DataFrame(columns=["rank_best", "rank_worst"]))
    overall = (
        ranked.assign(first=ranked["rank_best"] == 1)
        .groupby([*RANK_KEYS, "model"], sort=False)
        .agg(mean_rank=("rank", "mean"), tests=("rank", "size"), could_be_1st=("first", "sum"))
        .reset_index()
        .sort_values([*RANK_KEYS, "mean_rank", "model"], kind="stable", ignore_index=True)
    )
    return Ranking(ranked.reset_index(drop=True), overall, unranked)


def _rank_cell(r) -> str:
    span = (
        f"{int(r['rank_best'])}"
        if r["rank_best"] == r["rank_worst"]
        else f"{int(r['rank_best'])}–{int(r['rank_worst'])}"
    )
    interval = tables.interval(r["lo"], r["hi"])
    return f"{r['rank']:g} ({span}): {r['effect']:.3f}" + (f" {interval}" if interval else "")


def ranking_tables(ranking: Ranking) -> list[tuple[str, pd.DataFrame]]:
    """Per comparison (metric, series, setting): tests x models cells ``rank (plausible ranks): effect [lo,
    hi]``, then the mean ranks."""
    ranked, overall = ranking.ranked, ranking.overall
    out = []
    for (metric, series, setting), rows in ranked.groupby(RANK_KEYS, sort=False):
        title = " ".join(filter(None, [_title(metric), series, f"({setting})" if setting else ""]))
        cell = rows.apply(_rank_cell, axis=1)
        wide = rows.assign(cell=cell).pivot(index="test", columns="model", values="cell").fillna("undefined")
        wide = wide.loc[sorted(wide.index, key=plots.natural)].reset_index()
        wide.columns.name = None
        mean = overall[(overall["metric"] == metric) & (overall["series"] == series) & (overall["setting"] == setting)]
        out.append((f"{title}: rank by |effect size| (1 = smallest)", wide))
        out.append(
            (f"{title}: mean rank", mean[["model", "mean_rank", "tests", "could_be_1st"]].reset_index(drop=True))
        )
    return out


def _save(out: Path, name: str, fig) -> str:
    """Write the figure as ``name`` (PNG) and its PDF and SVG (:func:`jaxassoc.app.figures.save`)."""
    figures.save(fig, out / name)
    return name


def _spec(metric: str) -> MetricSpec:
    """The metric's spec; for a plugin metric this process cannot load, a spec of the defaults (its aggregates as
    they are, the conventional effect-size columns and figures)."""
    try:
        return get_metric(metric)
    except ConfigError:
        return MetricSpec(name=metric, run=_not_here, config=MetricConfig, model_kinds=())


def _not_here(job):
    raise ConfigError(f"metric {job.metric.name!r} is not registered in this process")


def _title(metric: str) -> str:
    return _spec(metric).title


def metric_section(metric: str, rows: pd.DataFrame, settings: pd.DataFrame, sweep_dir: Path, out: Path) -> list:
    """The blocks (:mod:`jaxassoc.app.report_html`) of one metric: its settings, compact tables (from each
    job's stored aggregates) and plots (written into ``out``)."""
    keys = [k for k in varying(settings) if k != "metric.name"]
    lead = setting_columns(settings, keys)
    title = _title(metric)
    blocks: list = [doc.Heading(f"{title} (`metric={metric}`)", 2), doc.Paragraph(_settings_line(settings, keys))]
    found: dict[str, list[pd.DataFrame]] = {}
    view_fn = _spec(metric).views
    for job in settings.index:
        for name, table in tables.views_of(view_fn, pd.read_parquet(sweep_dir / job / "aggregates.parquet")):
            front = pd.DataFrame({c: [lead.loc[job, c]] * len(table) for c in lead.columns})
            joined = pd.concat([front, table.reset_index(drop=True)], axis=1)
            joined.attrs = dict(table.attrs)
            found.setdefault(name, []).append(joined)
    for name, parts in found.items():
        blocks += ([doc.Heading(name, 3)] if name else []) + [doc.Table(tables.concat_jobs(parts))]
    drawn = _metric_plots(metric, rows, settings, keys, out)
    if drawn:
        blocks.append(doc.Figures(tuple(drawn)))
    return blocks


def _settings_line(settings: pd.DataFrame, keys: list[str]) -> str:
    fixed = [k for k in ("model.name", "dataset.name", "template.name", "whitening.name") if k not in keys]
    parts = [f"{len(settings)} job(s)"]
    for k in fixed:
        values = sorted(set(settings[k].map(_short)) - {""}) if k in settings else []
        if values:
            parts.append(f"{SHORT[k]}: {', '.join(values)}")
    if keys:
        parts.append("varying: " + ", ".join(f"`{k}`" for k in keys))
    return " · ".join(parts)


def _metric_plots(metric: str, rows: pd.DataFrame, settings: pd.DataFrame, keys: list[str], out: Path) -> list[str]:
    """The figures the metric's spec names (``MetricSpec.plots``), drawn from its rows and written into ``out``."""
    spec = _spec(metric)
    if not spec.plots:
        return []
    named = labels(settings, keys)
    rows = rows.join(named[["label"]], on="job")
    fixed = [
        f"{SHORT[k]}={_short(settings[k].iloc[0]).replace('null', 'all')}"
        for k in ("template.name", "dataset.sample")
        if k in settings and k not in keys
    ]
    found = effects(rows, spec.effects).join(named[["label"]], on="job")
    inp = PlotInput(rows=rows, effects=found, title=spec.title, fixed=", ".join(fixed))
    drawn = []
    for plot in spec.plots:
        fig = resolve(plot.draw)(inp)
        if fig is not None:
            drawn.append(_save(out, f"{plot.stem}_{metric}.png", fig))
    return drawn


def sweep_effects(table: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """Every metric's effect sizes for ranking, with the job's ``metric``, ``model`` (its name and the
    varying ``model.*`` settings that can change an effect), ``setting`` (the other varying settings that
    can: dataset, template, seed, ``metric.*``, ``stats.ddof``, ...; not those of :data:`NO_EFFECT_SIZE`)
    and ``n_bootstrap`` (the job's ``stats.n_bootstrap``, if it has one)."""
    parts = []
    for metric, metric_settings in settings.groupby("metric.name", sort=False):
        relevant = metric_settings.drop(columns=[c for c in metric_settings.columns if c in NO_EFFECT_SIZE])
        keys = [k for k in varying(relevant) if k != "metric.name"]
        spec = _spec(metric)
        found = effects(table[table["job"].isin(metric_settings.index)], spec.effects)
        if "stats.n_bootstrap" in metric_settings:
            found["n_bootstrap"] = found["job"].map(
                pd.to_numeric(metric_settings["stats.n_bootstrap"], errors="coerce")
            )
        parts.append(found.join(labels(relevant, keys, apart=False), on="job").assign(metric=metric))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def job_records(sweep_dir: Path, jobs: list[str]) -> dict[str, dict]:
    """Each job's ``results.json`` record without its aggregate rows: provenance, summary, files."""
    records = {}
    for job in jobs:
        record = json.loads((Path(sweep_dir) / job / store.RESULTS_JSON).read_text())
        records[job] = {k: v for k, v in record.items() if k not in ("aggregates", "inputs")}
    return records


def write_report(sweep_dir: Path, rank: bool = False) -> Path:
    """Gather the sweep, write ``report/`` (table, report.md, report.html, figures; with ``rank`` the model
    ranking, also in ``ranking.csv``) inside it; returns the folder."""
    sweep_dir = Path(sweep_dir)
    table = gather(sweep_dir)
    jobs = list(dict.fromkeys(table["job"]))
    settings = with_resolved_precision(job_settings(sweep_dir, jobs), table)
    out = sweep_dir / "report"
    store.write_table(out, "table", table)
    keys = varying(settings)
    title = f"jaxassoc report: {sweep_dir.resolve().name}"
    blocks: list = [
        doc.Paragraph(
            _settings_line(settings, keys)
            + " · metrics: "
            + ", ".join(f"{_title(m)}" for m in dict.fromkeys(settings["metric.name"]))
        ),
        doc.Paragraph(
            f"Legend: {tables.LEGEND}. Every table row is one job's; the first columns name the settings that "
            "vary between the jobs of that metric."
        ),
    ]
    blocks += precision_blocks(settings)
    blocks += finetune_blocks(table)
    for metric, metric_settings in settings.groupby("metric.name", sort=False):
        rows = table[table["job"].isin(metric_settings.index)]
        blocks += metric_section(metric, rows, metric_settings, sweep_dir, out)
    if "intervention.name" in keys:
        blocks += intervention_blocks(sweep_dir, table, settings, out)
    skipped = left_out(sweep_dir)
    if skipped:
        print(
            f"jaxassoc-report: {len(skipped)} job(s) left out:", *(f"  {job}: {why}" for job, why in skipped), sep="\n"
        )
        blocks += [doc.Heading("Jobs left out", 2), doc.Items(tuple(f"`{job}`: {why}" for job, why in skipped))]
    if rank:
        blocks += ranking_blocks(table, settings, out)
    text = markdown_text(title, blocks)
    store.atomic_write(out / "report.md", lambda p: p.write_text(text))
    page = doc.render(title, blocks, out, job_records(sweep_dir, jobs))
    store.atomic_write(out / "report.html", lambda p: p.write_text(page, encoding="utf-8"))
    store.atomic_write(out / "jobs.json", lambda p: p.write_text(json.dumps(sorted(jobs))))
    return out


def with_resolved_precision(settings: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``settings`` with each job's ``model.precision`` as it ran: a language model's from its rows'
    ``model_precision`` (``auto`` resolved per device), so a sweep over precisions, or devices, tells them
    apart; static word vectors are read in float32."""
    if "model.precision" not in settings.columns:  # a sweep from before the policies
        return settings
    ran = (
        table.groupby("job")["model_precision"].first() if "model_precision" in table.columns else pd.Series(dtype=str)
    )
    settings = settings.copy()
    settings["model.precision"] = [str(ran.get(job, "float32")).replace("nan", "float32") for job in settings.index]
    return settings


def precision_blocks(settings: pd.DataFrame) -> list:
    """A paragraph naming the jobs not computed in float32 (``model.precision``; docs/methods.md §12 gives
    each metric's measured deviation), or none when every model ran in float32."""
    if "model.precision" not in settings.columns:
        return []
    other = settings["model.precision"][settings["model.precision"] != "float32"]
    if other.empty:
        return []
    listed = ", ".join(
        f"{model} in {precision} ({n} job{'s' if n > 1 else ''})"
        for (model, precision), n in settings.loc[other.index].groupby(["model.name", "model.precision"]).size().items()
    )
    return [
        doc.Paragraph(
            f"**Not computed in float32**: {listed}. `mixed` keeps the weights and the matrix products' inputs in "
            "bfloat16 and everything else in float32; `bfloat16` / `float16` compute in that dtype throughout. "
            "docs/methods.md §12 gives each metric's measured deviation from float32."
        )
    ]


def finetune_blocks(table: pd.DataFrame) -> list:
    """A paragraph on the adapters trained against a bias (``intervention=lora``; docs/methods.md §13.5): per
    adapter, its bias metric's distance from the unbiased value on its training and held-out items before and
    after training, the held-out perplexity ratio, and the metrics whose rows include its training items."""
    if "ft_objective" not in table.columns:
        return []
    rows = table.dropna(subset=["ft_objective"]).groupby("job").first()
    if rows.empty:
        return []
    lines = []
    label = "intervention_label" if "intervention_label" in rows.columns else "ft_objective"
    for (model, adapter), group in rows.groupby(["model", label], sort=False):
        r = group.iloc[0]
        text = f"{model}, {adapter}: {int(r.ft_trained_parameters):,} trained parameters, held-out perplexity x{r.ft_heldout_ppl_ratio:.3f}"
        if r.ft_bias_metric:
            text += (
                f"; {r.ft_bias_metric}'s distance from unbiased on its training items {r.ft_bias_train_before:.3f} -> "
                f"{r.ft_bias_train_after:.3f}, on its held-out items {r.ft_bias_heldout_before:.3f} -> "
                f"{r.ft_bias_heldout_after:.3f}"
            )
            trained_on = sorted(set(group.loc[group["ft_this_metric_trained"].astype(bool), "metric"]))
            if trained_on:
                text += f" (the {', '.join(trained_on)} rows of this adapter include its training items)"
        lines.append(text)
    return [
        doc.Paragraph(
            "**Fine-tuned against a bias** (`intervention=lora`, docs/methods.md §13): "
            + "; ".join(lines)
            + ". Distance: the real metric's RMS distance from its unbiased value over its sub-scores (CrowS-Pairs: "
            "|share - 0.5|; RPAM: d); training and held-out items as split for training, so the held-out numbers "
            "are the ones that generalise. Each step's terms and every evaluation: `finetune_history.csv` in the job "
            "folder."
        )
    ]


INTERVENTION_TEXT = (
    "Each intervention against `intervention=none` with the same model, metric, dataset and other options, on "
    "the same items (docs/methods.md §11.11). CrowS-Pairs: Δ metric score (percentage points), p of the exact "
    "McNemar test of the pairs whose outcome changed (b: 1 → 0, c: 0 → 1), CI of a paired bootstrap over "
    "pairs; UnStereoEval: Δ US score and Δ preference disparity, paired bootstrap over sentence pairs; RPAM: Δd "
    "per test, paired bootstrap over targets; WEAT and SEAT: Δd only (their items hold no per-word scores). "
    "LM cost: WikiText-2 (pseudo-)perplexity with the intervention (`lm_ppl`) and without (`lm_ppl_none`)."
)


def _intervention_models(settings: pd.DataFrame) -> pd.Series:
    keys = [k for k in varying(settings) if not k.startswith(("intervention.", "metric.", "dataset."))]
    return labels(settings, keys, apart=False)["model"]


def intervention_comparisons(sweep_dir: Path) -> pd.DataFrame:
    """Every intervention job of a sweep folder against its ``none`` job on the same items
    (:func:`jaxassoc.app.comparisons.compare_with_none`; docs/methods.md §11.11)."""
    from jaxassoc.app import comparisons

    sweep_dir = Path(sweep_dir)
    jobs = list(dict.fromkeys(gather(sweep_dir)["job"]))
    settings = job_settings(sweep_dir, jobs)
    return comparisons.compare_with_none(sweep_dir, settings, _intervention_models(settings))


def intervention_blocks(sweep_dir: Path, table: pd.DataFrame, settings: pd.DataFrame, out: Path) -> list:
    """The section of a sweep that varies ``intervention``: bias-bench's table (interventions x models, each
    metric's headline with its CI and Δ against ``none``, the LM cost), the paired comparisons
    (``comparisons.parquet`` / ``.csv``) and the Δ bias vs Δ perplexity figure
    (:mod:`jaxassoc.app.comparisons`)."""
    from jaxassoc.app import comparisons

    found = comparisons.compare_with_none(sweep_dir, settings, _intervention_models(settings))
    blocks: list = [doc.Heading("Interventions against none", 2), doc.Paragraph(INTERVENTION_TEXT)]
    if found.empty:
        return [*blocks, doc.Paragraph("No intervention job has a `none` job of the same settings in this sweep.")]
    store.write_table(out, "comparisons", found)
    wide = comparisons.bias_bench_table(found, table, settings)
    blocks += [doc.Heading("Interventions x models", 3), doc.Table(wide)]
    shown = found.drop(columns=["job", "job_none"])
    blocks += [doc.Heading("Paired comparisons with none", 3), doc.Table(shown)]
    fig = comparisons.cost_figure(found)
    if fig is not None:
        blocks.append(doc.Figures((_save(out, "intervention_cost.png", fig),)))
    return blocks


def markdown_text(title: str, blocks: list) -> str:
    """``report.md``: the title, then the blocks as GitHub-flavoured Markdown."""
    lines = [f"# {title}", ""]
    for block in blocks:
        if isinstance(block, doc.Heading):
            lines += [f"{'#' * block.level} {block.text}", ""]
        elif isinstance(block, doc.Paragraph):
            lines += [block.text, ""]
        elif isinstance(block, doc.Table):
            lines += [tables.markdown(block.table), ""]
        elif isinstance(block, doc.Figures):
            lines += [f"![{name}]({name})" for name in block.names] + [""]
        elif isinstance(block, doc.Items):
            lines += [f"- {item}" for item in block.items] + [""]
    return "\n".join(lines) + "\n"


RANKING_TEXT = (
    "Per test, models ranked by |effect size| ascending (1 = least biased, as WEFE ranks absolute values); "
    "ties share their mean rank. In parentheses, the ranks the confidence intervals allow: from 1 + the "
    "number of models whose |effect| CI lies wholly below the model's to n − the number wholly above, so "
    "models whose CIs overlap are not told apart (a model whose range starts at 1 is not distinguishable "
    "from the best). Cells: `rank (plausible ranks): effect [CI]`. Mean rank over the tests with a defined "
    "effect (`tests`); `could_be_1st`: tests where no model is clearly less biased. Only models are "
    "ranked: a ranking is split by the settings that can change an effect size (dataset, template, seed, "
    "`metric.*`, `stats.ddof`, ...) and not by those that cannot (`stats` p-value and CI options, "
    "`model.batch_size`): the jobs of one model that differ only there count once."
)


def ranking_blocks(table: pd.DataFrame, settings: pd.DataFrame, out: Path) -> list:
    """The ranking section's blocks; writes ``ranking.csv`` (per-test ranks) and prints the tables. A sweep
    (or a comparison) with one model is not ranked, and says so."""
    found = sweep_effects(table, settings)
    head = [doc.Heading("Ranking of models", 2)]
    found = found[found["effect"].notna()] if len(found) else found
    if found.empty:
        print("ranking: no test with an effect size in this sweep")
        return [*head, doc.Paragraph("No test with an effect size in this sweep.")]
    ranking = rank_models(found)
    models = sorted(set(found["model"]))
    if ranking.ranked.empty:
        for stale in ("ranking.parquet", "ranking.csv"):
            (out / stale).unlink(missing_ok=True)
        what = f"one model (`{models[0]}`)" if len(models) == 1 else "no test where two or more models have an effect"
        line = f"Not ranked: the sweep has {what}; a ranking compares two or more models on the same test."
        print("ranking: " + line.replace("`", ""))
        return [*head, doc.Paragraph(line)]
    store.write_table(out, "ranking", ranking.ranked.drop(columns=["label"], errors="ignore"))
    blocks = [*head, doc.Paragraph(RANKING_TEXT)]
    for title, shown in ranking_tables(ranking):
        print(f"\n-- {title}\n{tables.text(shown, max_rows=200)}")
        blocks += [doc.Heading(title, 3), doc.Table(shown)]
    if len(ranking.unranked):
        alone = ranking.unranked.groupby([*RANK_KEYS, "model"], sort=False)["test"].agg(lambda t: ", ".join(t))
        items = tuple(
            " ".join(filter(None, [_title(metric), series, f"({setting})" if setting else ""]))
            + f": only `{model}` ({tests})"
            for (metric, series, setting, model), tests in alone.items()
        )
        print("not ranked (one model):", *items, sep="\n  ")
        blocks += [doc.Paragraph("Not ranked, one model only:"), doc.Items(items)]
    return blocks


@closes_quietly("jaxassoc-report")
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="jaxassoc-report", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="a Hydra sweep folder (or any folder of finished jobs)")
    parser.add_argument(
        "--rank",
        action="store_true",
        help="rank the models per test by |effect size| (WEFE-style, with the ranks their CIs allow) and add "
        "it to the report; needs two or more models",
    )
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        sys.exit(f"jaxassoc-report: error: {args.sweep_dir} is not a folder")
    print(f"report: {write_report(args.sweep_dir, rank=args.rank)}")


if __name__ == "__main__":
    main()
