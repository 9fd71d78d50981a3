"""US score vs the MaxPMI bound η, one panel per dataset and one line per model (Belem et al. 2024,
Figure 2 style), from a sweep of ``metric=unstereo`` jobs; also the table of US, PD and AuFC per η.

Usage: python experiments/unstereo_eval/plot_us_vs_eta.py <sweep dir>
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from jaxassoc.app.report import gather, write_report  # noqa: E402
from jaxassoc.app.tables import markdown  # noqa: E402

ORDER = ["USE-5", "USE-10", "USE-20", "Winobias", "Winogender"]
NAMES = {"use5": "USE-5", "use10": "USE-10", "use20": "USE-20", "winobias": "Winobias", "winogender": "Winogender"}


def main(sweep: Path) -> None:
    table = gather(sweep)
    table["dataset"] = table["dataset"].map(NAMES)
    table["eta"] = pd.to_numeric(table["subset"].replace("unconstrained", "inf"))
    out = write_report(sweep)
    aufc = [c for c in table.columns if c.startswith("aufc_") and c != "aufc_units"]  # the unit is in its name
    summary = table[["model", "dataset", "subset", "n", "us_score", "preference_disparity", *aufc]]
    (out / "unstereo_table.md").write_text(markdown(summary) + "\n")
    datasets = [d for d in ORDER if d in set(table["dataset"])]
    fig, axes = plt.subplots(1, len(datasets), figsize=(3.2 * len(datasets), 3.2), sharey=True, squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        rows = table[(table["dataset"] == dataset) & (table["subset"] != "unconstrained")]
        for model, line in rows.sort_values("eta").groupby("model"):
            ax.plot(line["eta"], line["us_score"], marker="o", label=model)
        ax.set_title(dataset)
        ax.set_xlabel("MaxPMI bound η")
    axes[0][0].set_ylabel("US score (% neutral)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "us_vs_eta.png", dpi=120)
    print(markdown(summary))
    print(f"\nwritten: {out}/unstereo_table.md, us_vs_eta.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
