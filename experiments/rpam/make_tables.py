"""Tables in the shape of Hodel et al. 2026 Tables 2/3/5/6 and a Figure 2-style bar chart, from a sweep.

    python experiments/rpam/make_tables.py RESULTS_DIR [RESULTS_DIR ...]

Reads every ``results.json`` under the folders (one per finished ``metric=rpam`` job) and writes, into the
first folder: ``table2_weat_ws.csv`` (d and p per test, TP1/TP2, one column block per model),
``table3_validation.csv`` (WS-353 rho, Bellezza Pearson/Spearman, Bellezza-5X rho, SST-2 F1, ablation,
downstream rho and parse rate), ``runtimes.csv`` (seconds per job), ``tables.md`` (all of it as
Markdown) and ``figure2_effect_sizes.png`` (the ten effect sizes per model and template). Rows note a
subsample (``n``) so a quick run is never mistaken for the paper's full setting.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd


def load_jobs(folders: list[Path]) -> list[dict]:
    jobs = []
    for folder in folders:
        for path in sorted(folder.rglob("results.json")):
            record = json.loads(path.read_text())
            prov = record["provenance"]
            cfg = prov["config"]
            if prov.get("metric") != "rpam":
                continue
            jobs.append(
                {
                    "model": prov["model"],
                    "dataset": prov["dataset"],
                    "template": prov["template"],
                    "normalise": cfg["metric"]["normalise"],
                    "group_size": cfg["metric"]["group_size"],
                    "downstream": cfg["metric"].get("downstream", False),
                    "sample": cfg["dataset"].get("sample"),
                    "seconds": record["summary"].get("seconds"),
                    "aggregates": pd.DataFrame(record["aggregates"]),
                    "folder": str(path.parent),
                }
            )
    return jobs


def weat_table(jobs: list[dict]) -> pd.DataFrame:
    """Table 2: per test, d and p for each (model, template)."""
    frames = []
    for job in jobs:
        if job["dataset"] != "weat_ws" or not job["normalise"]:
            continue
        agg = job["aggregates"]
        tests = agg[agg["test"] != "all"].set_index("test")
        label = f"{job['model']} {job['template'].upper()}"
        frames.append(tests[["effect_size", "p_value"]].rename(columns=lambda c: f"{label} {c}"))
        share = agg.loc[agg["test"] == "all", "share_positive"].iloc[0]
        frames[-1].loc["share d>0", f"{label} effect_size"] = share
    return pd.concat(frames, axis=1) if frames else pd.DataFrame()


def validation_table(jobs: list[dict]) -> pd.DataFrame:
    """Tables 3, 5 and 6: one row per (task, template, variant), one column per model."""
    rows = []
    for job in jobs:
        agg, tp, note = job["aggregates"], job["template"].upper(), f"n={job['sample']}" if job["sample"] else ""

        def add(task, value, extra=note):
            rows.append({"model": job["model"], "task": task, "value": value, "note": extra})

        if job["dataset"] == "wordsim353":
            add(f"WS-353 ({tp}) Spearman rho", agg["correlation"].iloc[0])
        elif job["dataset"] == "sst2":
            add(f"SST-2 ({tp}) F1", agg["correlation"].iloc[0])
        elif job["dataset"] == "bellezza" and job["downstream"]:
            r = agg.iloc[0]
            chat = "chat template" if r["chat_template"] else "plain prompt"
            add(
                f"Downstream ratings ({tp}; {chat}, {int(r['max_new_tokens'])} tokens) Spearman rho",
                r["correlation"],
                f"{note} parsed {int(r['n'])}/{int(r['n']) + int(r['n_unparsable'])} ({r['parse_rate']:.0%})".strip(),
            )
        elif job["dataset"] == "bellezza" and job["group_size"] > 1:
            add(f"Bellezza-{job['group_size']}X ({tp}) Spearman rho", agg["correlation"].iloc[0])
        elif job["dataset"] == "bellezza":
            for _, r in agg.iterrows():
                variant = "" if r["normalised"] else ", without normalisation"
                add(f"Bellezza ({tp}{variant}) {r['statistic'].capitalize()}", r["correlation"])
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows).drop_duplicates(["model", "task"], keep="last")
    values = table.pivot(index="task", columns="model", values="value")
    notes = table.groupby("task")["note"].agg(lambda s: "; ".join(sorted({n for n in s if n})))
    return values.assign(note=notes).sort_index()


def runtime_table(jobs: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": j["model"],
                "dataset": j["dataset"],
                "template": j["template"],
                "normalise": j["normalise"],
                "group_size": j["group_size"],
                "downstream": j["downstream"],
                "sample": j["sample"],
                "seconds": j["seconds"],
            }
            for j in jobs
        ]
    ).sort_values(["model", "dataset", "template"])


def figure2(table2: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = table2.drop(index="share d>0", errors="ignore").filter(like="effect_size")
    d.columns = [c.removesuffix(" effect_size") for c in d.columns]
    ax = d.plot.bar(figsize=(9, 4), width=0.8)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel("RPAM effect size d")
    ax.set_xlabel("WEAT-WS test")
    ax.set_title("RPAM Test on WEAT-WS (cf. Hodel et al. 2026, Figure 2)")
    ax.legend(fontsize=8)
    plt.tight_layout()
    ax.figure.savefig(path, dpi=150)
    plt.close(ax.figure)


def main(folders: list[str]) -> None:
    roots = [Path(f) for f in folders]
    jobs = load_jobs(roots)
    if not jobs:
        raise SystemExit(f"no finished metric=rpam jobs (results.json) under {folders}")
    out = roots[0]
    t2, t3, rt = weat_table(jobs), validation_table(jobs), runtime_table(jobs)
    parts = []
    for name, table, title in (
        ("table2_weat_ws", t2, "Table 2: WEAT-WS (RPAM Test)"),
        ("table3_validation", t3, "Tables 3/5/6: validation tasks"),
        ("runtimes", rt, "Run time per job"),
    ):
        if not table.empty:
            table.to_csv(out / f"{name}.csv")
            text = table.to_string(float_format=lambda v: f"{v:.3f}")
            parts.append(f"## {title}\n\n```\n{text}\n```\n")
    (out / "tables.md").write_text("\n".join(parts))
    if not t2.empty:
        figure2(t2, out / "figure2_effect_sizes.png")
    print("\n".join(parts))


if __name__ == "__main__":
    main(sys.argv[1:])
