"""Every intervention of a sweep against ``intervention=none`` on the same items (docs/methods.md §11.11), and
bias-bench's table: rows intervention x model, a column per metric's headline number with its CI and the
change against ``none``, and the LM cost.

:func:`compare_with_none` pairs each job whose intervention is not ``none`` with the sweep's ``none`` job of
the same settings otherwise (model, metric, dataset, seed, every other option) and compares their per-item
results (``items.parquet``), as :mod:`jaxassoc.stats.paired` computes:

- CrowS-Pairs (all pairs): Δ metric score in percentage points; p: exact McNemar test of the pairs whose
  outcome changed (``b``: counted for the stereotype without the intervention, not with it; ``c``: the
  reverse); CI: paired percentile bootstrap over pairs;
- UnStereoEval (all pairs): Δ US score and Δ preference disparity (percentage points), paired bootstrap over
  the sentence pairs (CI and two-sided p);
- RPAM on a WEAT suite: Δd per test, paired bootstrap of the targets' association scores (X and Y resampled
  separately, each draw scored with both);
- WEAT and SEAT: Δd per test only (their items hold the tests' rows, not per-word scores: no CI, no p).

Resamples: the ``none`` job's ``stats.n_bootstrap`` and ``stats.confidence``; key: ``jax.random.key(seed)``
folded with the comparison's row number. ``stats.correction`` (holm / bh) adds ``delta_p_holm`` /
``delta_p_bh`` over every p of the table (the whole sweep's comparisons, not one job's).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jaxassoc.app import tables
from jaxassoc.app.interventions import LM_COST_COLUMNS
from jaxassoc.stats import multiple
from jaxassoc.stats.options import StatsOptions

NO_RESULT = {"cache_dir", "cache_max_gb", "compile_cache", "quiet", "resume", "distributed", "distributed_timeout_s"}
COLUMNS = [
    "model",
    "metric",
    "dataset",
    "intervention",
    "method",
    "quantity",
    "test",
    "n",
    "value_none",
    "value",
    "delta",
    "delta_ci_low",
    "delta_ci_high",
    "delta_p",
    "delta_test",
    "b",
    "c",
    *LM_COST_COLUMNS,
    "job",
    "job_none",
]
NO_ITEM_SCORES = "none: the items hold no per-word scores"


def _key(seed: str, row: int):
    import jax

    return jax.random.fold_in(jax.random.key(int(seed or 0)), row)


def _options(settings: pd.Series) -> tuple[int, float]:
    def get(name, default, kind):
        value = settings.get(f"stats.{name}", "")
        return kind(value) if value not in ("", None) else default

    return get("n_bootstrap", StatsOptions.n_bootstrap, int), get("confidence", StatsOptions.confidence, float)


def _job_info(sweep_dir: Path, job: str) -> dict:
    aggregates = pd.read_parquet(sweep_dir / job / "aggregates.parquet")
    first = aggregates.iloc[0] if len(aggregates) else pd.Series(dtype=object)
    info = {c: first.get(c, np.nan) for c in LM_COST_COLUMNS}
    info["label"] = str(first.get("prov_intervention_label", "") or "")
    return info


def _row(**values) -> dict:
    return {c: values.get(c, np.nan) for c in COLUMNS}


def _crows_pairs(items, items_none, key, n_resamples, confidence):
    from jaxassoc.stats.paired import discordant, mcnemar_exact, paired_mean_difference

    on = ["sent_more", "sent_less"]
    both = items_none[[*on, "score"]].merge(items[[*on, "score"]], on=on, suffixes=("_none", ""), validate="1:1")
    before, after = both["score_none"].to_numpy(bool), both["score"].to_numpy(bool)
    b, c = discordant(before, after)
    test = mcnemar_exact(b, c)
    boot = paired_mean_difference(key, 100.0 * after, 100.0 * before, n_resamples=n_resamples, confidence=confidence)
    return [
        dict(
            quantity="metric_score",
            test="all pairs",
            n=len(both),
            value_none=100.0 * before.mean(),
            value=100.0 * after.mean(),
            delta=100.0 * (after.mean() - before.mean()),
            delta_ci_low=float(boot.low),
            delta_ci_high=float(boot.high),
            delta_p=test.p_value,
            delta_test="exact McNemar; CI: paired bootstrap over pairs",
            b=b,
            c=c,
        )
    ]


def _unstereo(items, items_none, aggregates, key, n_resamples, confidence):
    import jax

    from jaxassoc.stats.paired import paired_mean_difference

    if len(items) != len(items_none):
        return []
    threshold = float(aggregates["threshold_log10"].iloc[0]) if "threshold_log10" in aggregates else np.log10(1.65)

    def per_pair(frame):
        fm = (frame["F_logprob"] - frame["M_logprob"]).to_numpy(float) / np.log(10.0)
        neutral = np.abs(fm) <= threshold
        return 100.0 * neutral, np.where(neutral, 0.0, 100.0 * np.sign(fm))

    (us, pd_), (us0, pd0) = per_pair(items), per_pair(items_none)
    out = []
    for i, (quantity, a, b) in enumerate((("us_score", us, us0), ("preference_disparity", pd_, pd0))):
        boot = paired_mean_difference(jax.random.fold_in(key, i), a, b, n_resamples=n_resamples, confidence=confidence)
        out.append(
            dict(
                quantity=quantity,
                test="all pairs",
                n=len(a),
                value_none=b.mean(),
                value=a.mean(),
                delta=a.mean() - b.mean(),
                delta_ci_low=float(boot.low),
                delta_ci_high=float(boot.high),
                delta_p=float(boot.p_value),
                delta_test="paired bootstrap over sentence pairs",
            )
        )
    return out


def _effect_sizes(items, items_none, aggregates, aggregates_none, key, n_resamples, confidence, ddof):
    import jax

    from jaxassoc.stats.paired import paired_effect_size_difference

    def tests(frame):
        if "test" not in frame or "effect_size" not in frame:
            return pd.Series(dtype=float)
        rows = frame[frame["test"].notna() & frame["effect_size"].notna()]
        return rows.drop_duplicates("test").set_index(rows["test"].astype(str).drop_duplicates())["effect_size"]

    d, d0 = tests(aggregates), tests(aggregates_none)
    scored = {"test", "group", "score"} <= set(items) and {"test", "group", "score"} <= set(items_none)
    out = []
    for i, test in enumerate(t for t in d.index if t in d0.index):
        row = dict(quantity="d", test=test, value_none=float(d0[test]), value=float(d[test]))
        row["delta"] = row["value"] - row["value_none"]
        part = items[items["test"].astype(str) == test] if scored else None
        part0 = items_none[items_none["test"].astype(str) == test] if scored else None
        if scored and len(part) == len(part0) and len(part) >= 3 and list(part["target"]) == list(part0["target"]):
            boot = paired_effect_size_difference(
                jax.random.fold_in(key, i),
                part["score"].to_numpy(float),
                part0["score"].to_numpy(float),
                (part["group"] == "X").to_numpy(),
                ddof=ddof,
                n_resamples=n_resamples,
                confidence=confidence,
            )
            row |= dict(
                n=len(part),
                delta=float(boot.difference),
                delta_ci_low=float(boot.low),
                delta_ci_high=float(boot.high),
                delta_p=float(boot.p_value),
                delta_test="paired bootstrap over targets (X, Y apart)",
            )
        else:
            row["delta_test"] = NO_ITEM_SCORES
        out.append(row)
    return out


def pairs_with_none(settings: pd.DataFrame) -> dict[str, str]:
    """Job -> the ``none`` job of the same settings but the intervention's (``intervention.*``), for every job
    of ``settings`` (:func:`jaxassoc.app.report.job_settings`) whose intervention is not ``none``."""
    if "intervention.name" not in settings:
        return {}
    same = [c for c in settings.columns if not c.startswith("intervention.") and c not in NO_RESULT]
    key = settings[same].astype(str).apply(tuple, axis=1)
    none = settings.index[settings["intervention.name"].isin(["none", ""])]
    first_none = {}
    for job in none:
        first_none.setdefault(key[job], job)
    return {job: first_none[key[job]] for job in settings.index if job not in none and key[job] in first_none}


def compare_with_none(sweep_dir: Path, settings: pd.DataFrame, models: pd.Series | None = None) -> pd.DataFrame:
    """One row per compared quantity (and test) of every job with an intervention against its ``none`` job
    (:data:`COLUMNS`; the module's docstring says how each metric is compared), with ``delta_p_holm`` /
    ``delta_p_bh`` over the whole table when the jobs' ``stats.correction`` asks for it. ``settings``: one row
    per job (:func:`jaxassoc.app.report.job_settings`); ``models``: each job's model label (default: its
    ``model.name``). :func:`jaxassoc.app.report.intervention_comparisons` reads both from a sweep folder."""
    sweep_dir = Path(sweep_dir)
    if models is None:
        models = settings["model.name"]
    rows = []
    for job, none_job in pairs_with_none(settings).items():
        s = settings.loc[job]
        metric = s["metric.name"]
        n_resamples, confidence = _options(settings.loc[none_job])
        items, items_none = (pd.read_parquet(sweep_dir / j / "items.parquet") for j in (job, none_job))
        aggregates, aggregates_none = (pd.read_parquet(sweep_dir / j / "aggregates.parquet") for j in (job, none_job))
        key = _key(s.get("seed", "0"), len(rows))
        if metric == "crows_pairs":
            found = _crows_pairs(items, items_none, key, n_resamples, confidence)
        elif metric == "unstereo":
            found = _unstereo(items, items_none, aggregates, key, n_resamples, confidence)
        else:
            ddof = int(s.get("stats.ddof", "") or StatsOptions.ddof)
            found = _effect_sizes(items, items_none, aggregates, aggregates_none, key, n_resamples, confidence, ddof)
        info = _job_info(sweep_dir, job)
        common = dict(
            model=models[job],
            metric=metric,
            dataset=s.get("dataset.name", ""),
            intervention=info["label"] or s["intervention.name"],
            method=s["intervention.name"],
            job=job,
            job_none=none_job,
            **{c: info[c] for c in LM_COST_COLUMNS},
        )
        rows += [_row(**common, **r) for r in found]
    table = pd.DataFrame(rows, columns=COLUMNS)
    corrections = set(settings.get("stats.correction", pd.Series(dtype=str))) - {"", "none"}
    for correction in sorted(corrections):
        p = table["delta_p"].to_numpy(dtype=float)
        table[f"delta_p{multiple.COLUMN_SUFFIX[correction]}"] = multiple.adjust(p, correction) if len(p) else p
    return table


HEADLINES = {"crows_pairs": "metric_score", "unstereo": "us_score"}
"""The quantity of a metric that bias-bench's table shows (effect-size metrics: mean |d| over their tests)."""


def _cell(value, lo, hi, delta, p, none: bool) -> str:
    text = f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"
    interval = tables.interval(lo, hi)
    if interval:
        text += f" {interval}"
    if not none and np.isfinite(delta):
        mark = tables.stars(p) if np.isfinite(p) else ""
        text += f" (Δ {delta:+.3g}{mark})" if abs(delta) < 1 else f" (Δ {delta:+.1f}{mark})"
    return text


def bias_bench_table(comparisons: pd.DataFrame, table: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """bias-bench's table: one row per intervention (its label; ``none`` first) and model, one column per
    metric's headline (CrowS-Pairs metric score, UnStereoEval US score: the value with its CI as the job
    reports it; WEAT, SEAT, RPAM: mean |d| over the tests), ``(Δ ...)`` against ``none`` with the stars of
    its p where there is one, and the LM cost (``lm_ppl`` / ``lm_ppl_none``)."""
    if comparisons.empty:
        return pd.DataFrame()
    lines: dict[tuple[str, str], dict] = {}
    for _, r in comparisons.iterrows():
        head = HEADLINES.get(r["metric"], "d")
        if r["quantity"] != head:
            continue
        column = f"{r['metric']} ({'mean |d|' if head == 'd' else head})"
        for who, job, value in (("none", r["job_none"], r["value_none"]), (r["intervention"], r["job"], r["value"])):
            line = lines.setdefault((who, r["model"]), {"intervention": who, "model": r["model"]})
            line.setdefault(f"_{column}", []).append((job, value, r))
        line = lines[(r["intervention"], r["model"])]
        for c in ("lm_ppl", "lm_ppl_none"):
            line[c] = r[c]
        lines[("none", r["model"])].update(lm_ppl=r["lm_ppl_none"], lm_ppl_none=r["lm_ppl_none"])  # the same model
    out = []
    for (who, _), line in lines.items():
        row = {"intervention": line["intervention"], "model": line["model"]}
        for name in [k for k in line if k.startswith("_")]:
            entries = line[name]
            column = name[1:]
            if "(mean |d|)" in column:
                values = np.abs([e[1] for e in entries])
                if who == "none":
                    row[column] = _cell(float(np.mean(values)), np.nan, np.nan, np.nan, np.nan, True)
                else:
                    none = np.abs([e[2]["value_none"] for e in entries])
                    row[column] = _cell(
                        float(values.mean()), np.nan, np.nan, float(values.mean() - none.mean()), np.nan, False
                    )
                continue
            job, value, r = entries[0]
            lo, hi = _headline_ci(table, job, r["metric"])
            row[column] = _cell(value, lo, hi, r["delta"], r["delta_p"], who == "none")
        row["lm_ppl"] = line.get("lm_ppl", np.nan)
        row["lm_ppl_none"] = line.get("lm_ppl_none", np.nan)
        out.append(row)
    frame = pd.DataFrame(out)
    frame["_none"] = frame["intervention"] != "none"
    return (
        frame.sort_values(["_none", "intervention", "model"], kind="stable")
        .drop(columns="_none")
        .reset_index(drop=True)
    )


def _headline_ci(table: pd.DataFrame, job: str, metric: str) -> tuple[float, float]:
    rows = table[table["job"] == job]
    if metric == "crows_pairs" and "bias_type" in rows:
        rows = rows[rows["bias_type"] == "all"]
        if len(rows):
            return float(rows["ci_low"].iloc[0]), float(rows["ci_high"].iloc[0])
    if metric == "unstereo" and "subset" in rows:
        rows = rows[rows["subset"].astype(str) == "unconstrained"]
        if len(rows) and "us_std_error" in rows:
            us, se = float(rows["us_score"].iloc[0]), float(rows["us_std_error"].iloc[0])
            return us - 1.959963984540054 * se, us + 1.959963984540054 * se
    return np.nan, np.nan


def cost_figure(comparisons: pd.DataFrame):
    """Δ bias against Δ LM cost: one panel per metric headline (:data:`HEADLINES`; effect-size metrics: each
    test's Δd), one point per intervention and model with its paired CI, x = ``lm_ppl - lm_ppl_none``; None
    when no compared row has both."""
    import matplotlib.pyplot as plt

    shown = (
        comparisons[
            comparisons.apply(lambda r: r["quantity"] == HEADLINES.get(r["metric"], "d"), axis=1)
            & np.isfinite(pd.to_numeric(comparisons["lm_ppl"], errors="coerce"))
        ]
        if len(comparisons)
        else comparisons
    )
    if shown.empty:
        return None
    metrics = list(dict.fromkeys(shown["metric"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4), squeeze=False)
    methods = list(dict.fromkeys(shown["intervention"]))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(methods)}
    for ax, metric in zip(axes[0], metrics):
        rows = shown[shown["metric"] == metric]
        x = rows["lm_ppl"].astype(float) - rows["lm_ppl_none"].astype(float)
        for label, part in rows.groupby("intervention", sort=False):
            px, y = x[part.index], part["delta"].astype(float)
            lo, hi = part["delta_ci_low"].astype(float), part["delta_ci_high"].astype(float)
            err = np.vstack([(y - lo).where(lo.notna(), 0), (hi - y).where(hi.notna(), 0)])
            ax.errorbar(px, y, yerr=err, fmt="o", ms=4, capsize=2, color=colours[label], label=label)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.axvline(0, color="0.6", lw=0.8)
        head = HEADLINES.get(metric, "d")
        ax.set_title(f"{metric}: Δ {head}" + (" per test" if head == "d" else ""), fontsize=9)
        ax.set_xlabel("Δ perplexity (with − without)")
        ax.set_ylabel(f"Δ {head}" + (" (pp)" if head != "d" else ""))
    axes[0][-1].legend(fontsize=7, frameon=False, loc="best")
    fig.tight_layout()
    return fig
