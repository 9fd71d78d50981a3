"""``results.md`` and the figures of experiments/finetune_mitigation: every intervention's bias numbers with the LM cost,
the bias metrics' training and held-out items apart, and each adapter's training curves.

python experiments/finetune_mitigation/summarize.py <results folder> [<publish folder>]
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pandas as pd

RPAM_TESTS = ("C6", "C7", "C8")  # WEAT-WS's gender tests, the RPAM bias term's (career/family, math/arts, science/arts)
SEAT_TESTS = ("W6", "W7", "W8")  # the Caliskan suite's gender tests, as SEAT sentences


def _markdown(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(not run)"
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    header = [str(c) for c in frame.columns]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, ["---"] * len(header), *cells])


def _jobs(out: Path, sweep: str) -> list[tuple[Path, pd.DataFrame, float]]:
    """Each job of a sweep: its folder, its aggregate rows and its seconds."""
    found = []
    for path in sorted((out / sweep).glob("*/aggregates.parquet")):
        seconds = json.loads((path.parent / "results.json").read_text()).get("summary", {}).get("seconds", float("nan"))
        found.append((path.parent, pd.read_parquet(path), float(seconds)))
    return found


def _label(rows: pd.DataFrame) -> str:
    label = rows.get("prov_intervention_label")
    if label is not None and pd.notna(label.iloc[0]):
        return re.sub(r"^lora r8 attn\.q\+attn\.v vs ", "lora: ", str(label.iloc[0]))
    return str(rows["prov_intervention"].iloc[0])


def _cost(rows: pd.DataFrame) -> tuple[str, str]:
    if "lm_ppl" not in rows or pd.isna(rows["lm_ppl"].iloc[0]):
        return "", ""
    ppl, base = float(rows["lm_ppl"].iloc[0]), float(rows["lm_ppl_none"].iloc[0])
    return f"{ppl:.2f}", f"{100 * (ppl / base - 1):+.1f} %"


def _row(rows: pd.DataFrame, seconds: float, cells: dict) -> dict:
    out = {"intervention": _label(rows), **cells}
    out["WikiText-2 ppl"], out["Δ ppl"] = _cost(rows)
    out["seconds"] = f"{seconds:.0f}"
    return out


def crows_table(out: Path) -> tuple[pd.DataFrame, list[dict]]:
    table, points = [], []
    for _, rows, seconds in _jobs(out, "crows"):
        by_type = rows.set_index("bias_type")
        cells = {}
        for bias in ("all", "gender", "race-color", "religion"):
            if bias in by_type.index:
                r = by_type.loc[bias]
                cells[f"{bias} (n)"] = f"{r.metric_score:.1f} [{r.ci_low:.1f}, {r.ci_high:.1f}] ({int(r.n)})"
        table.append(_row(rows, seconds, cells))
        if "gender" in by_type.index:
            ratio = float(rows["lm_ppl"].iloc[0] / rows["lm_ppl_none"].iloc[0]) if "lm_ppl" in rows else 1.0
            points.append({"label": _label(rows), "gender": float(by_type.loc["gender"].metric_score), "ratio": ratio})
    return pd.DataFrame(table), points


def effect_table(out: Path, sweep: str, tests: tuple[str, ...]) -> pd.DataFrame:
    table = []
    for _, rows, seconds in _jobs(out, sweep):
        chosen = rows[rows["test"].isin(tests)].drop_duplicates("test").set_index("test")
        d, low, high = (
            ("d_raw", "ci_low_raw", "ci_high_raw") if "d_raw" in rows else ("effect_size", "ci_low", "ci_high")
        )
        cells = {t: f"{chosen.loc[t, d]:.2f} [{chosen.loc[t, low]:.2f}, {chosen.loc[t, high]:.2f}]"
                 for t in tests if t in chosen.index}  # fmt: skip
        cells[f"mean abs d ({tests[0]}-{tests[-1]})"] = f"{chosen[d].abs().mean():.3f}"
        table.append(_row(rows, seconds, cells))
    return pd.DataFrame(table)


def unstereo_table(out: Path) -> pd.DataFrame:
    table = []
    for _, rows, seconds in _jobs(out, "unstereo"):
        r = rows.set_index("subset").loc["unconstrained"]
        cells = {"US score (%)": f"{r.us_score:.1f}", "preference disparity (pp)": f"{r.preference_disparity:+.1f}",
                 "n": int(r.n)}  # fmt: skip
        table.append(_row(rows, seconds, cells))
    return pd.DataFrame(table)


def split_table(out: Path) -> tuple[pd.DataFrame, dict[str, Path]]:
    """Per adapter trained against a metric: that metric's real value on its training and held-out items before
    and after (the RMS distance from the unbiased value), and the folder of one job holding its history."""
    table, histories = [], {}
    for sweep in ("crows", "rpam", "unstereo", "seat"):
        for folder, rows, _ in _jobs(out, sweep):
            if "ft_objective" not in rows:
                continue
            label = _label(rows)
            histories.setdefault(label, folder / "finetune_history.csv")
            r = rows.iloc[0]
            if not r.ft_bias_metric or any(t["adapter"] == label for t in table):
                continue
            table.append({"adapter": label, "bias metric": r.ft_bias_metric,
                          "training items: before -> after": f"{r.ft_bias_train_before:.3f} -> {r.ft_bias_train_after:.3f}",
                          "held-out items: before -> after": f"{r.ft_bias_heldout_before:.3f} -> {r.ft_bias_heldout_after:.3f}",
                          "held-out text ppl ratio": f"{r.ft_heldout_ppl_ratio:.3f}"})  # fmt: skip
    return pd.DataFrame(table), histories


def training_seconds(out: Path) -> dict[str, float]:
    """Each adapter's training seconds, from the log of the job that trained it."""
    found = {}
    for log in out.glob("*/*/main.log"):
        text = log.read_text()
        trained = re.search(r"intervention=lora: trained in ([0-9.]+) s", text)
        if trained:
            rows = (
                pd.read_parquet(log.parent / "aggregates.parquet")
                if (log.parent / "aggregates.parquet").exists()
                else None
            )
            if rows is not None:
                found[_label(rows)] = float(trained.group(1))
    return found


def curves(histories: dict[str, Path], path: Path) -> None:
    """Per adapter: the loss and its terms by step, and at each evaluation the held-out text's perplexity ratio
    and, for a metric adapter, the surrogate and the real metric on the training and held-out items."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = {k: pd.read_csv(v) for k, v in histories.items() if v.exists()}
    fig, axes = plt.subplots(len(shown), 2, figsize=(9.0, 2.6 * len(shown)), squeeze=False)
    for (label, h), (left, right) in zip(shown.items(), axes):
        steps = h.dropna(subset=["loss"])
        for term in ("loss", "lm", "bias2", "preservation"):
            if term in steps:
                left.plot(steps["step"], steps[term], label=term, lw=1)
        left.set_yscale("log")
        left.set_title(label, fontsize=8)
        left.set_xlabel("step", fontsize=7)
        left.legend(fontsize=6)
        evals = h.dropna(subset=["heldout_ppl_ratio"])
        real = [c for c in evals.columns if " real " in c]
        for column in real:
            name, _, split = column.partition(" real ")
            surrogate = column.replace(" real ", " surrogate ")
            line = right.plot(evals["step"], evals[column], label=f"{name} real, {split}", lw=1.2)[0]
            if surrogate in evals and not evals[surrogate].equals(evals[column]):
                right.plot(evals["step"], evals[surrogate], ls="--", color=line.get_color(), lw=1,
                           label=f"{name} surrogate, {split}")  # fmt: skip
        twin = right.twinx()
        twin.plot(evals["step"], evals["heldout_ppl_ratio"], color="black", lw=0.8, ls=":", label="held-out ppl ratio")
        twin.set_ylabel("ppl ratio", fontsize=7)
        twin.ticklabel_format(axis="y", useOffset=False)
        right.set_xlabel("step", fontsize=7)
        if real:
            right.legend(fontsize=5, loc="upper left", ncol=2)
        twin.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=200)


def cost_figure(points: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    for i, p in enumerate(sorted(points, key=lambda p: p["ratio"])):
        ax.scatter(p["ratio"], p["gender"], color="tab:blue", zorder=3)
        ax.annotate(p["label"], (p["ratio"], p["gender"]), fontsize=6, xytext=(4, 4 + 6 * (i % 3)),
                    textcoords="offset points")  # fmt: skip
    ax.axhline(50, color="black", lw=0.5, ls=":", label="no preference (50)")
    ax.set_xscale("log")
    ax.set_xlabel("WikiText-2 test perplexity ratio, with / without (log scale)")
    ax.set_ylabel("CrowS-Pairs gender score (%)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=200)


def main(out: Path, publish: Path | None = None) -> None:
    crows, points = crows_table(out)
    rpam = effect_table(out, "rpam", RPAM_TESTS)
    seat = effect_table(out, "seat", SEAT_TESTS)
    unstereo = unstereo_table(out)
    split, histories = split_table(out)
    seconds = training_seconds(out)
    lines = [
        "# Fine-tuning against a bias on SmolLM2-135M-Instruct (CPU budget)",
        "",
        "Every intervention's bias numbers with the WikiText-2 test perplexity with it and its change against the",
        "model without it; `lora: ...` rows are adapters (rank 8 on attn.q, attn.v) trained by CDA or against a",
        "metric's differentiable score; `seconds`: the job's wall time (the job that trained an adapter includes",
        "its training).",
        "",
        "## The bias metric on its own training and held-out items",
        "",
        "The real metric's RMS distance from its unbiased value (CrowS-Pairs: |share - 0.5| over the gender pairs;",
        "RPAM: d over C6, C7, C8), before and after training; the held-out items are the ones that generalise.",
        "",
        _markdown(split) if len(split) else "(no metric adapter)",
        "",
        "Training seconds: " + ", ".join(f"{k}: {v:.0f} s" for k, v in sorted(seconds.items())),
        "",
        "## CrowS-Pairs (seeded sample; % with its exact 95 % CI and n)",
        "",
        _markdown(crows),
        "",
        "## RPAM Test, WEAT-WS gender tests (TP1; d with its 95 % bootstrap CI)",
        "",
        _markdown(rpam),
        "",
        "## UnStereoEval (USE-5, seeded sample; unconstrained subset)",
        "",
        _markdown(unstereo),
        "",
        "## SEAT, the Caliskan suite's gender tests (d with its 95 % bootstrap CI)",
        "",
        _markdown(seat),
        "",
    ]
    (out / "results.md").write_text("\n".join(lines))
    curves(histories, out / "training_curves.png")
    cost_figure(points, out / "cost_vs_bias.png")
    if publish is not None:
        for name in ("results.md", "training_curves.png", "cost_vs_bias.png"):
            shutil.copy(out / name, publish / (name if name != "results.md" else "results_smollm2-135m.md"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
