"""Figures for papers (issue 27, point 2): PNG, PDF and SVG with a tight bounding box, written atomically;
heatmap text by cell luminance, all three significance levels and a colour scale covering the data; the
raw-vs-whitened scatter with CI error bars, labels and legend; correlation bars with CIs and n; a WEAT cosine
figure of block means, not 4 million cosines in a few hundred pixels; job figures saved the same way."""

import dataclasses
import math
import xml.etree.ElementTree as ET

import jax
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from jaxassoc.app import figures, plots, registry
from jaxassoc.app.spec import JobResult

TWO_TESTS = pd.DataFrame(
    {
        "job": ["a", "a", "b", "b"],
        "test": ["W1", "W2", "W1", "W2"],
        "series": ["", "", "", ""],
        "effect": [2.0, -0.3, 0.9, -1.6],
        "lo": [1.5, -0.8, 0.2, -2.0],
        "hi": [2.4, 0.2, 1.5, -1.1],
        "p": [0.0001, 0.2, 0.004, 0.03],
        "label": ["model one (template=a long template name)"] * 2 + ["model two (template=b)"] * 2,
    }
)


def test_save_writes_png_pdf_and_svg_with_a_tight_box_and_no_date(tmp_path):
    fig, ax = plt.subplots(figsize=(2.0, 1.5))
    ax.plot([0, 1], [0, 1])
    ax.set_title("a title much wider than the two-inch figure it belongs to, which a plain savefig clips")
    paths = figures.save(fig, tmp_path / "plot.png", close=False)
    assert [p.name for p in paths] == ["plot.png", "plot.pdf", "plot.svg"]
    with Image.open(paths[0]) as image:
        # PNG stores pixels per metre as an integer: 200 dpi is stored as 7874 px/m and reads back as 199.9996 (abs=1)
        assert image.info["dpi"] == pytest.approx((figures.DPI, figures.DPI), abs=1)
        assert image.size[0] > 2.0 * figures.DPI * 1.5  # the box grew to hold the title: not clipped
    assert paths[1].read_bytes().startswith(b"%PDF")
    assert ET.parse(paths[2]).getroot().tag.endswith("svg")
    before = {p.name: p.read_bytes() for p in paths[1:]}
    figures.save(fig, tmp_path / "plot")  # the stem works too; the vector files carry no date
    assert {p.name: p.read_bytes() for p in paths[1:]} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.pdf", "plot.png", "plot.svg"]
    assert figures.names("model.name=x") == ("model.name=x.png", "model.name=x.pdf", "model.name=x.svg")


def test_save_is_atomic(tmp_path):
    fig, ax = plt.subplots()
    figures.save(fig, tmp_path / "plot")
    before = (tmp_path / "plot.png").read_bytes()
    fig, ax = plt.subplots()

    def dies_half_way(target, **options):
        with open(target, "wb") as f:
            f.write(b"\x89PNG half")
        raise KeyboardInterrupt

    fig.savefig = dies_half_way
    with pytest.raises(KeyboardInterrupt):
        figures.save(fig, tmp_path / "plot")
    assert (tmp_path / "plot.png").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.pdf", "plot.png", "plot.svg"]


def test_text_colour_follows_the_cells_luminance():
    cmap = plt.get_cmap("RdBu_r")
    assert figures.text_colour(cmap(1.0)) == "white"  # dark red
    assert figures.text_colour(cmap(0.0)) == "white"  # dark blue
    assert figures.text_colour(cmap(0.5)) == "black"  # near white
    assert figures.text_colour("yellow") == "black" and figures.text_colour("black") == "white"
    assert figures.symmetric_limit([0.5, -2.0, np.nan], [1.0]) == 2.0 and figures.symmetric_limit([]) == 1.0


def test_heatmap_marks_every_level_covers_the_data_and_picks_readable_text():
    fig = plots.effect_size_heatmap(TWO_TESTS, "WEAT")
    ax = fig.axes[0]
    image = ax.get_images()[0]
    assert (image.norm.vmin, image.norm.vmax) == (-2.0, 2.0)  # max |d|, not a fixed 1.5
    texts = {t.get_text(): t for t in ax.texts}
    assert set(texts) == {"2.00\n***", "-0.30", "0.90\n**", "-1.60\n*"}
    for text in ax.texts:
        x, y = (round(v) for v in text.get_position())
        cell = image.cmap(image.norm(image.get_array()[y, x]))
        assert text.get_color() == figures.text_colour(cell)
    assert texts["2.00\n***"].get_color() == "white" and texts["-0.30"].get_color() == "black"
    assert "effect size" in fig.axes[1].get_ylabel()  # the colour bar says what it shows
    plt.close(fig)


def test_scatter_has_ci_error_bars_axis_labels_and_a_legend():
    rows = pd.concat(
        [
            TWO_TESTS.assign(series="raw"),
            TWO_TESTS.assign(series="whitened", effect=TWO_TESTS["effect"] / 2, lo=TWO_TESTS["lo"] / 2, hi=np.inf),
        ],
        ignore_index=True,
    )
    fig = plots.raw_vs_whitened_scatter(rows, "WEAT")
    ax = fig.axes[0]
    assert "raw" in ax.get_xlabel() and "whitened" in ax.get_ylabel() and "CI" in ax.get_xlabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert set(TWO_TESTS["label"]) <= set(legend) and any("y = x" in t for t in legend)
    first = ax.containers[0]  # job a: x error bars span its raw CIs
    x_segments = first.lines[2][0].get_segments()
    assert [tuple(np.round([s[0][0], s[1][0]], 6)) for s in x_segments] == [(1.5, 2.4), (-0.8, 0.2)]
    y_segments = first.lines[2][1].get_segments()
    assert y_segments[0][1][1] == pytest.approx(ax.get_ylim()[1])  # a one-sided CI runs to the edge
    assert {t.get_text() for t in ax.texts} == {"W1", "W2"}
    plt.close(fig)


def test_correlation_ci_is_fishers_z():
    lo, hi = figures.correlation_ci(0.5, 28, "pearson")  # SE = 1/5
    # float64 Fisher z against the same formula in float64: a few ulps, inside approx's rel 1e-6
    assert (lo, hi) == pytest.approx(
        (math.tanh(math.atanh(0.5) - 1.959964 * 0.2), math.tanh(math.atanh(0.5) + 0.391993))
    )
    # the published 4-decimal values: ±5e-5 from their rounding, abs=1e-4
    assert (lo, hi) == pytest.approx((0.1560, 0.7358), abs=1e-4)
    s_lo, s_hi = figures.correlation_ci(0.5, 28, "spearman")  # Bonett & Wright: wider
    assert s_lo < lo and s_hi > hi
    assert all(math.isnan(v) for v in figures.correlation_ci(0.6, 300, "f1"))
    assert all(math.isnan(v) for v in figures.correlation_ci(0.5, 3, "pearson"))


def test_correlation_bars_carry_their_ci_and_n():
    table = pd.DataFrame(
        {
            "benchmark": ["Bellezza", "Bellezza", "SST-2", "SST-2", "WS-353", "WS-353"],
            "statistic": ["pearson", "pearson", "f1", "f1", "spearman", "spearman"],
            "correlation": [0.5, 0.3, 0.6, 0.7, 0.4, 0.2],
            "ci_low": [np.nan, np.nan, np.nan, np.nan, 0.1, np.nan],
            "ci_high": [np.nan, np.nan, np.nan, np.nan, 0.6, np.nan],
            "n": [28, 28, 300, 300, 100, 200],
            "label": ["m (a)", "m (b)"] * 3,
        }
    )
    fig = plots.correlation_bars(table, "template=t")
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["Bellezza pearson\nn = 28", "SST-2 f1\nn = 300", "WS-353 spearman"]
    assert sorted(t.get_text() for t in ax.texts) == ["n=100", "n=200"]  # n differs: on the bars
    bars = {round(p.get_height(), 3): p for p in ax.patches}
    spans = sorted(
        tuple(np.round([s[0][1], s[1][1]], 4))
        for c in ax.containers
        if hasattr(c, "lines")
        for s in c.lines[2][0].get_segments()
    )
    fisher = tuple(np.round(figures.correlation_ci(0.5, 28), 4))
    assert fisher in spans and (0.1, 0.6) in spans  # Fisher z; the row's own CI where it has one
    assert len(spans) == 4 and len(bars) == 6  # F1 bars have no error bar
    assert "Fisher" in ax.get_title() and "template=t" in ax.get_title()
    plt.close(fig)


def test_cosine_figure_shows_block_means_with_labelled_axes(tmp_path, monkeypatch):
    from jaxassoc.app.tasks.weat import plot_cosine_heatmaps
    from jaxassoc.embeddings.whitening import fit_zca
    from jaxassoc.metrics.anisotropy import cosine_matrix, sample_rows

    reference = np.random.default_rng(0).normal(size=(600, 6)).astype(np.float32) + 0.8
    zca = fit_zca(reference)
    drawn = []
    original = figures.save
    monkeypatch.setattr(figures, "save", lambda fig, path: drawn.append(fig) or original(fig, path, close=False))
    path = plot_cosine_heatmaps(jax.random.key(3), reference, zca, tmp_path / "cosine_matrices.png", n_samples=450)
    assert path == tmp_path / "cosine_matrices.png"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"cosine_matrices.{s}" for s in ("pdf", "png", "svg")]
    raw_ax, _, bar = drawn[0].axes
    shown = raw_ax.get_images()[0].get_array()
    assert shown.shape == (200, 200)  # 450 vectors in blocks of 2 or 3, not 450 x 450 pixels
    cos = np.asarray(cosine_matrix(np.asarray(sample_rows(jax.random.key(3), reference, 450))), dtype=np.float64)
    order = np.argsort(-(cos.sum(1) - np.diag(cos)), kind="stable")
    starts = (np.arange(200) * 450) // 200
    block = cos[np.ix_(order, order)][starts[5] : starts[6], starts[9] : starts[10]]
    assert shown[5, 9] == pytest.approx(block.mean(), abs=1e-5)  # an off-diagonal block: its mean cosine
    assert "sorted" in raw_ax.get_xlabel() and "sorted" in raw_ax.get_ylabel()
    assert "mean cosine per block" in bar.get_ylabel() and "diagonal left out" in bar.get_ylabel()
    assert "by their mean raw cosine" in drawn[0].get_supxlabel()
    plt.close(drawn[0])


def test_job_figures_are_saved_as_png_pdf_and_svg(tmp_path, monkeypatch):
    from app_helpers import app_config

    from jaxassoc.app.main import run_job

    def with_figure(job):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        ax.set_title("a job's own figure")
        return JobResult(
            items=pd.DataFrame({"item": [0]}),
            aggregates=pd.DataFrame({"test": ["t"], "effect_size": [0.1]}),
            figures={"job_plot": fig},
        )

    with app_config("toy_metric") as compose:
        monkeypatch.setitem(registry.METRICS, "toy", dataclasses.replace(registry.METRICS["toy"], run=with_figure))
        cfg = compose("metric=toy", "model=glove-6b-50d", "cache_dir=null", "quiet=true")
        run_job(cfg, tmp_path / "job")
    for suffix in ("png", "pdf", "svg"):
        assert (tmp_path / "job" / f"job_plot.{suffix}").stat().st_size > 0
    with Image.open(tmp_path / "job" / "job_plot.png") as image:
        # PNG stores pixels per metre as an integer: 200 dpi is stored as 7874 px/m and reads back as 199.9996 (abs=1)
        assert image.info["dpi"] == pytest.approx((figures.DPI, figures.DPI), abs=1)


@pytest.mark.parametrize("plot", [plots.forest_plot, plots.effect_size_heatmap])
def test_figures_say_what_each_test_id_stands_for(plot):
    named = TWO_TESTS.assign(name=["Flowers/Insects x Pleasant/Unpleasant", "Jobs/Arts x Male/Female"] * 2)
    texts = [t.get_text() for t in plot(named, "WEAT").axes[0].texts]
    key = [t for t in texts if t.startswith("W1: ")]
    assert key and "W1: Flowers/Insects x Pleasant/Unpleasant; W2: Jobs/Arts x Male/Female" in key[0].replace("\n", " ")
    assert not [t for t in (t.get_text() for t in plot(TWO_TESTS, "WEAT").axes[0].texts) if t.startswith("W1: ")]
    plt.close("all")


def test_the_direct_effect_heatmap_is_centred_on_the_total_effect_and_the_indirect_on_zero():
    from jaxassoc.app.plots import head_effect_heatmaps

    heads = pd.DataFrame(
        {
            "label": "tiny",
            "layer": [0, 0, 1, 1],
            "head": [0, 1, 0, 1],
            "indirect_effect": [0.02, -0.01, 0.05, 0.0],
            "direct_effect": [0.31, 0.28, 0.22, 0.30],  # a head that mediates nothing leaves the total, 0.30
            "total_effect": 0.30,
            "n": 8,
        }
    )
    fig = head_effect_heatmaps(heads, "Mediation")
    indirect, direct = (ax.images[0].get_clim() for ax in fig.axes[:2] if ax.images)
    assert indirect == pytest.approx((-0.05, 0.05)) and direct == pytest.approx((0.22, 0.38))  # 0.30 ± 0.08
