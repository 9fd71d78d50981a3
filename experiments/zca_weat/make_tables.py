"""Table A1 (d and p raw/whitened with the change class per model and test) and Figures 3-4 of the
ZCA-WEAT paper, from a sweep of ``metric=weat whitening=zca`` jobs.

Usage: python experiments/zca_weat/make_tables.py <sweep dir>
"""

import sys
from pathlib import Path

import pandas as pd

from jaxassoc.app.report import gather, write_report
from jaxassoc.app.tables import markdown
from jaxassoc.app.tasks.weat import plot_effect_size_heatmap, plot_raw_vs_whitened


def main(sweep: Path) -> None:
    table = gather(sweep)
    tests = table[table["test"].astype(str).str.match(r"W\d+$") & table["d_whitened"].notna()]
    per_model = {
        model: rows.sort_values("test", key=lambda t: t.str[1:].astype(int))
        for model, rows in tests.groupby("model", sort=False)
    }
    a1 = pd.concat(per_model.values())[
        ["model", "test", "d_raw", "p_raw", "d_whitened", "p_whitened", "change", "paper_class"]
    ]
    out = sweep / "report"
    write_report(sweep)
    (out / "table_a1.md").write_text("# Table A1: WEAT raw vs ZCA-whitened\n\n" + markdown(a1) + "\n")
    a1.to_csv(out / "table_a1.csv", index=False)
    plot_effect_size_heatmap(per_model, out / "figure3_heatmap.png")
    plot_raw_vs_whitened(per_model, out / "figure4_raw_vs_whitened.png")
    counts = a1.groupby(["model", "change"]).size().unstack(fill_value=0)
    print(markdown(a1))
    print("\n" + counts.to_string())
    print(f"\nwritten: {out}/table_a1.md, figure3_heatmap.png, figure4_raw_vs_whitened.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
