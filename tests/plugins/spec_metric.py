"""A plugin metric that declares its report through its spec alone: a title, a compact table (``views``), where
its effect sizes are (``effects``) and its figures (the built-in effect plots and one of its own)."""

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from jaxassoc.plugin import EFFECT_PLOTS, Effects, JobResult, MetricConfig, Plot, register_metric


@dataclass
class SpecToyConfig(MetricConfig):
    shift: float = 0.0


def run(job) -> JobResult:
    rng = np.random.default_rng(job.seed)
    d = rng.normal(size=2) + job.metric.shift
    aggregates = pd.DataFrame(
        {
            "test": ["T1", "T2"],
            "d": d,
            "lo": d - 0.2,
            "hi": d + 0.2,
            "p": [0.01, 0.3],
            "n": [8, 8],
            "spread": [1.0, 2.0],
        }
    )
    return JobResult(items=aggregates.copy(), aggregates=aggregates)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    return [("Toy effects per test", aggregates[["test", "d", "p", "n"]])]


def spread_bars(inp):
    """A figure of the plugin's own, from its rows (one bar per job and test)."""
    fig, ax = plt.subplots()
    ax.bar(range(len(inp.rows)), inp.rows["spread"])
    ax.set_title(f"{inp.title}: spread")
    return fig


register_metric(
    "spec_toy",
    run=run,
    config=SpecToyConfig,
    model_kinds=("static", "causal"),
    reads_dataset=False,
    title="Toy effect sizes (a plugin)",
    views=views,
    effects=(Effects(series="d", effect="d", lo="lo", hi="hi", p="p"),),
    plots=(*EFFECT_PLOTS, Plot("spread", spread_bars)),
)
