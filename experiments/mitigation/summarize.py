"""``results.md`` and ``cost_vs_bias.png`` of experiments/mitigation: every method's bias numbers with the LM cost.

python experiments/mitigation/summarize.py <results folder> [<publish folder>]
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd

GENDER_TESTS = ("W6", "W7", "W8")  # Caliskan et al.'s gender tests (career/family, math/arts, science/arts)


def _markdown(frame: pd.DataFrame) -> str:
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    header = [str(c) for c in frame.columns]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, ["---"] * len(header), *cells])


def _jobs(out: Path, sweep: str) -> list[tuple[pd.DataFrame, float]]:
    """Each job of a sweep: its aggregate rows and its seconds."""
    found = []
    for path in sorted((out / sweep).glob("*/aggregates.parquet")):
        seconds = json.loads((path.parent / "results.json").read_text()).get("summary", {}).get("seconds", float("nan"))
        found.append((pd.read_parquet(path), float(seconds)))
    return found


def _label(rows: pd.DataFrame) -> str:
    label = rows.get("prov_intervention_label")
    return (
        str(label.iloc[0]) if label is not None and pd.notna(label.iloc[0]) else str(rows["prov_intervention"].iloc[0])
    )


def _cost(rows: pd.DataFrame) -> tuple[str, str]:
    if "lm_ppl" not in rows or pd.isna(rows["lm_ppl"].iloc[0]):
        return "", ""
    ppl, base = float(rows["lm_ppl"].iloc[0]), float(rows["lm_ppl_none"].iloc[0])
    return f"{ppl:.2f}", f"{100 * (ppl / base - 1):+.1f} %"


def crows_table(out: Path, sweeps: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    table, points = [], []
    for sweep in sweeps:
        for rows, seconds in _jobs(out, sweep):
            by_type = rows.set_index("bias_type")
            cell = {"intervention": _label(rows)}
            for bias in ("all", "gender", "race-color", "religion"):
                if bias in by_type.index:
                    r = by_type.loc[bias]
                    cell[f"{bias} (n)"] = f"{r.metric_score:.1f} [{r.ci_low:.1f}, {r.ci_high:.1f}] ({int(r.n)})"
            cell["WikiText-2 ppl"], cell["Δ ppl"] = _cost(rows)
            cell["seconds"] = f"{seconds:.0f}"
            table.append(cell)
            if "lm_ppl" in rows and "gender" in by_type.index and pd.notna(rows["lm_ppl"].iloc[0]):
                points.append({"label": cell["intervention"], "gender": float(by_type.loc["gender"].metric_score),
                               "dppl": 100 * (float(rows["lm_ppl"].iloc[0]) / float(rows["lm_ppl_none"].iloc[0]) - 1)})  # fmt: skip
    return pd.DataFrame(table), points


def effect_table(out: Path, sweep: str) -> pd.DataFrame:
    table = []
    for rows, seconds in _jobs(out, sweep):
        gender = rows[rows["test"].isin(GENDER_TESTS)].set_index("test")
        d, low, high = ("d_raw", "ci_low_raw", "ci_high_raw") if "d_raw" in rows else ("d", "ci_low", "ci_high")
        cell = {"model": rows["prov_model"].iloc[0], "intervention": _label(rows)}
        for test in GENDER_TESTS:
            if test in gender.index:
                r = gender.loc[test]
                cell[test] = f"{r[d]:.2f} [{r[low]:.2f}, {r[high]:.2f}]"
        cell["mean |d| (W6-W8)"] = f"{gender[d].abs().mean():.3f}"
        cell["WikiText-2 ppl"], cell["Δ ppl"] = _cost(rows)
        cell["seconds"] = f"{seconds:.0f}"
        table.append(cell)
    return pd.DataFrame(table)


def figure(points: list[dict], base: float | None, path: Path) -> None:
    """CrowS-Pairs gender score against the perplexity ratio (log scale), the gender interventions only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [p for p in points if " gender" in p["label"]]
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for i, p in enumerate(sorted(shown, key=lambda p: (p["dppl"], p["gender"]))):
        ratio = 1 + p["dppl"] / 100
        ax.scatter(ratio, p["gender"], color="tab:blue", zorder=3)
        far = ratio > 100  # the far right: label to the left of the point
        ax.annotate(p["label"].replace(" gender", ""), (ratio, p["gender"]), fontsize=7, ha="right" if far else "left",
                    xytext=(-4 if far else 4, -10 if far else 4 + 7 * (i % 3)), textcoords="offset points")  # fmt: skip
    if base is not None:
        ax.axhline(base, color="grey", lw=0.8, ls="--", label="no intervention")
    ax.axhline(50, color="black", lw=0.5, ls=":", label="no preference (50)")
    ax.set_xscale("log")
    ax.set_xlabel("WikiText-2 test perplexity ratio, with / without (log scale)")
    ax.set_ylabel("CrowS-Pairs gender score (%)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=200)


def main(out: Path, publish: Path | None = None) -> None:
    crows, points = crows_table(out, ["smollm2_crows_gender", "smollm2_crows_race_religion", "smollm2_crows_layers"])
    seat, weat = effect_table(out, "seat"), effect_table(out, "glove_weat")
    none = crows[crows["intervention"] == "none"]
    base = float(none["gender (n)"].iloc[0].split()[0]) if len(none) and "gender (n)" in none else None
    lines = [
        "# Mitigation on the embedded models (bias-bench's study, CPU-sized)",
        "",
        "CrowS-Pairs metric score (% of pairs whose more-stereotyping sentence the model prefers; 50 = none) with its",
        "exact 95 % CI and n, per bias type, on SmolLM2-135M-Instruct; the LM cost: WikiText-2 test perplexity with",
        "the intervention and its change against the same model without it. `seconds`: the job's wall time.",
        "",
        _markdown(crows),
        "",
        "SEAT on the Caliskan suite's gender tests (d with its 95 % bootstrap CI; the erasers at the final norm):",
        "",
        _markdown(seat),
        "",
        "WEAT on GloVe 6B 50d, the whole table transformed (Hard Debias with Bolukbasi et al.'s lists; the erasers",
        "fitted on the vectors of jaxassoc's gender word pairs):",
        "",
        _markdown(weat),
        "",
    ]
    (out / "results.md").write_text("\n".join(lines))
    figure(points, base, out / "cost_vs_bias.png")
    if publish is not None:
        shutil.copy(out / "results.md", publish / "results_smollm2-135m.md")
        shutil.copy(out / "cost_vs_bias.png", publish / "cost_vs_bias.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
