"""``results.md`` of experiments/mediation_smollm2: the total effect, the top heads by natural indirect effect,
and RPAM's WEAT-WS effect sizes and UnStereoEval's preference disparity with and without those heads.

    python experiments/mediation_smollm2/summarize.py <results folder> <top heads ablated> [<publish folder>]

With a publish folder, also ``results_<model>.md`` and ``heads_<model>.png`` there.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pandas as pd


def _markdown(frame: pd.DataFrame, index: bool = True) -> str:
    """A pipe table, numbers to 4 significant digits."""
    frame = frame.reset_index() if index else frame
    cells = [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    header = [str(c) for c in frame.columns]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, ["---"] * len(header), *cells])


def _jobs(sweep: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(p) for p in sorted(sweep.glob("*/aggregates.parquet"))]
    return pd.concat(frames, ignore_index=True)


def main(out: Path, top: int, publish: Path | None = None) -> None:
    med = pd.read_parquet(out / "mediation" / "aggregates.parquet")
    heads = med[med["component"] == "head"].sort_values("indirect_effect", ascending=False)
    lines = [
        f"# Causal mediation of gender bias in {med['prov_model'].iloc[0]}",
        "",
        f"{int(med['n'].iloc[0])} examples (template × profession; the options: `mediation/results.json`). "
        "Total effect of set-gender: "
        f"**{med['total_effect'].iloc[0]:.3f}** (mean relative change of p(anti)/p(stereo); docs/methods.md §10.2).",
        "",
        f"## Top {top} heads by natural indirect effect",
        "",
        _markdown(heads.head(top)[["layer", "head", "indirect_effect", "direct_effect"]], index=False),
        "",
        "![heads](mediation/report/heads_mediation.png)",
        "",
        f"## Other metrics with those {top} heads ablated (zero)",
        "",
    ]
    rpam = _jobs(out / "ablation_rpam")
    rpam = rpam[rpam["test"].notna() & rpam["effect_size"].notna()]
    table = rpam.pivot_table(index="test", columns="prov_intervention", values="effect_size", aggfunc="first")
    lines += ["RPAM on WEAT-WS (template TP1), effect size d:", "", _markdown(table), ""]
    use = _jobs(out / "ablation_unstereo")
    use = use[use["subset"].astype(str) == "unconstrained"] if "subset" in use else use
    cols = [c for c in ("us_score", "preference_disparity", "n") if c in use]
    lines += [
        "UnStereoEval USE-10 (all sampled pairs, no MaxPMI filter):",
        "",
        _markdown(use.set_index("prov_intervention")[cols]),
    ]
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    print(text)
    if publish is not None:  # a copy beside the scripts, its figure with it
        model = str(med["prov_model"].iloc[0])
        shutil.copy(out / "mediation" / "report" / "heads_mediation.png", publish / f"heads_{model}.png")
        (publish / f"results_{model}.md").write_text(
            text.replace("mediation/report/heads_mediation.png", f"heads_{model}.png")
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]) if len(sys.argv) > 3 else None)
