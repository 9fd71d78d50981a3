"""The sweep report (``jaxassoc-report``) and the console tables: one section per metric with only its
columns, counts as integers, p-values with significance marks, CIs as ``[lo, hi]``, undefined statistics
named, no empty column; a forest plot per metric with CIs; the WEFE-style ranking of models per test."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from app_helpers import app_config, use_tiny_suite, write_tiny_glove

from jaxassoc.app import plots, report, store, tables
from jaxassoc.app.main import console_tables, run_job


@pytest.fixture(scope="module")
def compose():
    with app_config() as compose:
        yield compose


def noisy_copy(source, path):
    """Another tiny model of the same shape (one compilation serves both): the vectors plus noise."""
    rng = np.random.default_rng(1)
    lines = []
    for line in source.read_text().splitlines():
        word, *values = line.split(" ")
        noisy = np.asarray(values, dtype=np.float32) + rng.normal(scale=0.5, size=len(values))
        lines.append(f"{word} {' '.join(f'{v:.6f}' for v in noisy)}\n")
    path.write_text("".join(lines))
    return path


@pytest.fixture(scope="module")
def sweep(compose, tmp_path_factory):
    """2 models x 2 datasets of WEAT (ZCA-whitened, no similarity benchmarks) on tiny GloVe-like vectors,
    written as a sweep is."""
    root = tmp_path_factory.mktemp("sweep")
    models = {"tiny_a": write_tiny_glove(root / "a.txt"), "tiny_b": noisy_copy(root / "a.txt", root / "b.txt")}
    consoles = []
    with pytest.MonkeyPatch.context() as patch:
        use_tiny_suite(patch)
        for name, glove in models.items():
            for dataset in ("weat_caliskan2017", "weat_ws"):
                cfg = compose(
                    "metric=weat",
                    "model=glove-6b-50d",
                    f"model.source={glove}",
                    f"model.name={name}",
                    f"dataset={dataset}",
                    "whitening=zca",
                    "cache_dir=null",
                    "quiet=true",
                    "metric.similarity=false",
                    "stats.exact_bound=0",
                    "stats.n_permutations=100",
                    "stats.n_bootstrap=40",
                )
                result = run_job(cfg, root / "sweep" / f"model.name={name},dataset={dataset}")
                consoles.append(console_tables("weat", result))
    return root / "sweep", consoles


@pytest.mark.slow  # shares the 2x2 sweep fixture: ~16 s (issue 38: the default suite's budget)
def test_weat_console_tables_split_tests_and_anisotropy_without_nan(sweep):
    text = sweep[1][0]
    assert "nan" not in text.lower()
    assert "* p < .05, ** p < .01, *** p < .001" in text
    tests, anisotropy = text.split("-- anisotropy")
    assert "cosine_mean_raw" not in tests and not re.search(r"\bd_raw\b", anisotropy)  # own columns each


@pytest.mark.slow  # shares the 2x2 sweep fixture (issue 38: the default suite's budget)
def test_report_of_a_2x2_sweep_has_per_metric_sections_marks_cis_and_forest_plot(sweep):
    out = report.write_report(sweep[0])
    text = (out / "report.md").read_text()
    assert "## WEAT (`metric=weat`)" in text
    assert "varying: `model.name`, `dataset.name`" in text
    assert "### tests" in text and "### anisotropy" in text
    tests_table = text.split("### tests")[1].split("###")[0]
    header = tests_table.strip().splitlines()[0]
    assert header.startswith("| model | dataset | test | name |")
    assert "| d_raw | ci_raw | p_raw | d_whitened | ci_whitened | p_whitened |" in header
    assert "cosine_mean_raw" not in header and "benchmark" not in header  # only this table's columns
    rows = [line for line in tests_table.splitlines() if line.startswith("| tiny_")]
    assert len(rows) == 8  # 2 models x 2 datasets x 2 tests
    assert all(re.search(r"\| \[-?\d+\.\d{3}, -?\d+\.\d{3}\] \|", r) for r in rows)
    assert "nan" not in text.lower()
    assert re.search(r"\\\*", text)  # significance marks (escaped for Markdown) and their legend
    assert "p < .05" in text
    for table in re.findall(r"(?:^\|.*\|\n)+", text, flags=re.M):  # no column empty in every row
        lines = [line.split(" | ") for line in table.strip().splitlines()]
        for j in range(len(lines[0])):
            assert any(cells[j].strip(" |") for cells in lines[2:]), (lines[0][j], table)
    for name in ("forest_weat.png", "effect_sizes_weat.png", "raw_vs_whitened_weat.png"):
        assert (out / name).stat().st_size > 0 and f"]({name})" in text
        for vector in (name.replace(".png", ".pdf"), name.replace(".png", ".svg")):
            assert (out / vector).stat().st_size > 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('<table class="sortable">') == text.count("\n|---|") and "data:image/png;base64," in page


def test_present_names_undefined_statistics_and_drops_empty_columns():
    table = pd.DataFrame(
        {
            "test": ["W1", "W2"],
            "effect_size": [0.5, np.nan],
            "ci_low": [0.1, np.nan],
            "ci_high": [0.9, np.nan],
            "p_value": [0.004, np.nan],
            "n_targets": [8.0, 8.0],
            "undefined_reason": ["", "a set has no word"],
            "empty": [np.nan, np.nan],
        }
    )
    shown = tables.present(table)
    assert list(shown.columns) == ["test", "effect_size", "ci", "p_value", "n_targets", "undefined_reason"]
    assert shown.iloc[0].tolist() == ["W1", "0.500", "[0.100, 0.900]", "0.004 **", "8", ""]
    assert shown.iloc[1].tolist() == ["W2", "undefined", "undefined", "undefined", "8", "a set has no word"]


def fabricated_sweep(root):
    """Three models x three tests of a WEAT-like metric, written as finished jobs (no model run); the set
    sizes are floats, as a concat with rows that have none makes them."""
    effects = {"m1": [0.5, -0.2, 1.0], "m2": [-0.5, 0.3, np.nan], "m3": [0.1, 0.2, 2.0]}
    for model, values in effects.items():
        job = root / f"model.name={model}"
        job.mkdir(parents=True)
        aggregates = pd.DataFrame(
            {
                "test": ["T1", "T2", "T3"],
                "effect_size": values,
                "ci_low": [v - 0.1 for v in values],
                "ci_high": [v + 0.1 for v in values],
                "p_value": [0.01, 0.2, 0.0001],
                "n_targets": [50.0, 16.0, 8.0],
            }
        )
        config = {"model": {"name": model}, "metric": {"name": "toyrank"}, "dataset": {"name": "d"}}
        store.write_results(
            job, aggregates.head(0), aggregates, {"config": config, "model": model, "metric": "toyrank"}, {}
        )
    return root


def test_rank_models_gives_wefe_ranks_with_ties_averaged(tmp_path):
    sweep_dir = fabricated_sweep(tmp_path / "sweep")
    table = report.gather(sweep_dir)
    settings = report.job_settings(sweep_dir, list(dict.fromkeys(table["job"])))
    ranked, overall, unranked = report.rank_models(report.sweep_effects(table, settings))
    assert unranked.empty
    ranks = ranked.pivot(index="test", columns="model", values="rank")
    # T1: |0.5| = |-0.5| tie above 0.1 -> m3 1, m1 and m2 share (2 + 3) / 2; T2: |0.2| twice below 0.3;
    # T3: m2 undefined, |1.0| < |2.0|
    assert ranks.loc["T1"].to_dict() == {"m1": 2.5, "m2": 2.5, "m3": 1.0}
    assert ranks.loc["T2"].to_dict() == {"m1": 1.5, "m2": 3.0, "m3": 1.5}
    assert ranks.loc["T3", "m1"] == 1.0 and ranks.loc["T3", "m3"] == 2.0 and np.isnan(ranks.loc["T3", "m2"])
    means = overall.set_index("model")
    # float64 means of 2 or 3 ranks: exact but for 5/3's last ulp
    assert means["mean_rank"].to_dict() == pytest.approx({"m1": 5 / 3, "m2": 2.75, "m3": 1.5})
    assert means["tests"].to_dict() == {"m1": 3, "m2": 2, "m3": 3}
    assert overall["model"].tolist() == ["m3", "m1", "m2"]
    # the ranks the CIs allow: T1 m3's |d| CI [0, 0.2] lies below m1's and m2's [0.4, 0.6], which overlap;
    # T2 all three overlap; T3 [0.9, 1.1] below [1.9, 2.1]
    best = ranked.pivot(index="test", columns="model", values="rank_best")
    worst = ranked.pivot(index="test", columns="model", values="rank_worst")
    assert best.loc["T1"].to_dict() == {"m1": 2, "m2": 2, "m3": 1} and worst.loc["T1"].to_dict() == {
        "m1": 3,
        "m2": 3,
        "m3": 1,
    }
    assert best.loc["T2"].tolist() == [1, 1, 1] and worst.loc["T2"].tolist() == [3, 3, 3]
    assert (best.loc["T3", "m1"], worst.loc["T3", "m1"], best.loc["T3", "m3"], worst.loc["T3", "m3"]) == (1, 1, 2, 2)
    assert means["could_be_1st"].to_dict() == {"m1": 2, "m2": 1, "m3": 2}


def test_rank_cli_prints_and_writes_the_ranking(tmp_path, capsys):
    sweep_dir = fabricated_sweep(tmp_path / "sweep")
    report.main([str(sweep_dir), "--rank"])
    printed = capsys.readouterr().out
    assert "mean rank" in printed and "2.5 (2–3): -0.500 [-0.600, -0.400]" in printed
    text = (sweep_dir / "report" / "report.md").read_text()
    assert "## Ranking of models" in text and "| T1 | 2.5 (2–3): 0.500 [0.400, 0.600] |" in text
    assert "| T3 |" in text and "undefined" in text.split("## Ranking of models")[1]
    assert "| m1 | T1 | 0.500 | [0.400, 0.600] | 0.010 \\* | 50 |" in text  # the metric's section
    assert (sweep_dir / "report" / "forest_toyrank.png").stat().st_size > 0
    assert json.loads((sweep_dir / "report" / "jobs.json").read_text()) == [
        "model.name=m1",
        "model.name=m2",
        "model.name=m3",
    ]


def test_rpam_console_table_prints_counts_as_integers_and_the_share_row_apart():
    """RPAM's aggregates: float set sizes (a concat with the share row made them float) and the share of
    positive tests, which used to print as a row of NaN under the tests."""
    from jaxassoc.app.tasks import rpam

    aggregates = pd.DataFrame(
        {
            "test": ["C1", "C2", "all"],
            "name": ["a", "b", "share of tests with d > 0 (WEAT-WS F1)"],
            "effect_size": [1.5, 0.2, np.nan],
            "p_value": [0.0004, 0.3, np.nan],
            "ci_low": [1.3, -0.5, np.nan],
            "ci_high": [1.7, 0.9, np.nan],
            "undefined_reason": ["", "", np.nan],
            "n_targets": [50.0, 16.0, np.nan],
            "n_attributes": [50.0, 16.0, np.nan],
            "share_positive": [np.nan, np.nan, 1.0],
            "n_undefined": [np.nan, np.nan, 0.0],
            "prov_model": "m",
        }
    )
    text = tables.console(tables.views_of(rpam.views, aggregates))
    assert "nan" not in text.lower() and ".000 " not in text.replace("1.000", "")
    lines = text.splitlines()
    assert re.fullmatch(r"\s*C1\s+a\s+50\s+50\s+1\.500\s+\[1\.300, 1\.700\]\s+<0\.001 \*\*\*", lines[2])
    share = next(i for i, line in enumerate(lines) if line.startswith("-- share of tests"))
    assert re.fullmatch(r"\s*1\.000\s+0", lines[share + 2]) and "share_positive" not in "".join(lines[:share])
    assert "undefined_reason" not in text and "prov_model" not in text


def test_correlation_bars_keep_templates_and_sample_sizes_apart(tmp_path):
    """Two templates x two sample sizes of one model: four bars per benchmark, each named by its settings
    (the old plot averaged them into one bar without saying so)."""
    root = tmp_path / "sweep"
    values = {("tp1", 100): 0.8, ("tp2", 100): 0.4, ("tp1", 200): 0.7, ("tp2", 200): 0.2}
    for (template, sample), r in values.items():
        job = root / f"template={template},dataset.sample={sample}"
        job.mkdir(parents=True)
        aggregates = pd.DataFrame(
            {
                "benchmark": ["Bellezza"],
                "statistic": ["spearman"],
                "correlation": [r],
                "p_value": [0.001],
                "n": [sample],
            }
        )
        config = {
            "model": {"name": "m"},
            "metric": {"name": "rpam"},
            "dataset": {"name": "bellezza", "sample": sample},
            "template": {"name": template, "text": f"text of {template}"},
        }
        provenance = {"config": config, "model": "m", "metric": "rpam"}
        store.write_results(job, aggregates.head(0), aggregates, provenance, {})
    table = report.gather(root)
    settings = report.job_settings(root, list(dict.fromkeys(table["job"])))
    keys = report.varying(settings)
    assert keys == ["dataset.sample", "template.name"]  # template.text follows from template.name
    fig = plots.correlation_bars(table.join(report.labels(settings, keys)[["label"]], on="job"), "")
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 3) for p in ax.patches)
    assert heights == sorted(values.values())
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert legend == {f"m (sample={s}, template={t})" for t, s in values}
    out = report.write_report(root)
    assert (out / "correlations_rpam.png").stat().st_size > 0
    text = (out / "report.md").read_text()
    assert "| sample | template | benchmark | statistic | correlation | p_value | n |" in text
    assert "| 100 | tp1 | Bellezza | spearman | 0.800 | 0.001 \\*\\* | 100 |" in text


def test_a_p_below_its_tests_resolution_prints_as_below_p_min_and_a_p_at_it_as_usual():
    table = pd.DataFrame(
        {
            "test": ["a", "b", "c"],
            "p_value": [0.0, float(np.float32(1 / 100_001)), 0.2],
            "p_min": [1 / 6, 1 / 100_001, 1 / 6],
        }
    )
    shown = tables.present(table)
    assert shown["p_value"].tolist() == ["<0.167", "<0.001 ***", "0.200"] and "p_min" not in shown
    assert tables.present(table.assign(p_min=[0.004, 0.004, 0.004]))["p_value"].iloc[0] == "<0.004 **"
