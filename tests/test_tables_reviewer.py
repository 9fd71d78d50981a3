"""The tables a reviewer reads (issue: results a reviewer accepts): names, sizes, lost words, how p was
counted, sidedness notes, multiple-comparison columns, SC-WEAT's direction, τ with p and CI, η and units."""

import json

import pandas as pd
import pytest
from app_helpers import run_metric, start_hydra, use_tiny_suite, write_tiny_glove

from jaxassoc.app import tables
from jaxassoc.app.tasks import stereotypes, unstereo, weat


@pytest.fixture(scope="module", autouse=True)
def hydra():
    yield from start_hydra()


@pytest.fixture(scope="module")
def glove(tmp_path_factory):
    return write_tiny_glove(tmp_path_factory.mktemp("glove") / "tiny.txt")


def static(glove, *extra):
    return ["metric=weat", "model=glove-6b-50d", f"model.source={glove}", "model.name=tiny", "cache_dir=null", *extra]


def test_weat_table_names_sizes_lost_words_counts_and_sidedness(glove, monkeypatch, tmp_path):
    use_tiny_suite(monkeypatch)
    result = run_metric(static(glove, "stats.n_permutations=500", "stats.n_bootstrap=200"), tmp_path)
    [(title, table)] = tables.views_of(weat.views, result.aggregates, "none")
    shown = tables.present(table)
    assert list(shown.columns[:8]) == ["test", "name", "n_x", "n_y", "n_a", "n_b", "lost_words", "permutations"]
    assert shown["name"].tolist() == ["flowers/insects", "jobs/arts"]
    assert shown.loc[0, "lost_words"] == "zinnia"  # the tiny GloVe file has no vector for it
    assert shown.loc[0, "permutations"].startswith("exact (")  # 5 + 5 targets: 252 partitions, enumerated
    assert "coverage" not in shown  # lost_words says which word, not only how many
    note, uncorrected = tables.notes(table)
    assert (
        note.startswith("p: two-sided permutation test") and "CI of d: two-sided 95 % percentile bootstrap, 200" in note
    )
    assert uncorrected.startswith("p not corrected for the 2 tests")
    text = tables.console([(title, table)])
    assert "note: p: two-sided" in text and "p not corrected" in text


def test_a_one_sided_p_sits_beside_a_one_sided_ci_in_the_table(glove, monkeypatch, tmp_path):
    use_tiny_suite(monkeypatch)
    result = run_metric(static(glove, "stats.n_bootstrap=200", "stats.alternative=greater"), tmp_path)
    [(_, table)] = tables.views_of(weat.views, result.aggregates, "none")
    shown = tables.present(table)
    assert shown["ci_raw"].str.endswith(", ∞)").all()
    assert tables.notes(table)[0].startswith("p: one-sided (greater) permutation test")
    assert "CI of d: one-sided (greater) 95 %" in tables.notes(table)[0]


@pytest.mark.parametrize("correction, suffix", [("holm", "_holm"), ("bh", "_bh")])
def test_correction_adds_its_own_column_per_table(glove, monkeypatch, tmp_path, correction, suffix):
    use_tiny_suite(monkeypatch)
    result = run_metric(static(glove, "stats.n_bootstrap=200", f"stats.correction={correction}"), tmp_path)
    assert not any(c.endswith(suffix) for c in result.aggregates)  # the result files keep the raw p
    config = json.dumps({"stats": {"correction": correction}})
    recorded = result.aggregates.assign(prov_config=config)  # the report reads it from the job's record
    [(_, table)] = tables.views_of(weat.views, recorded)
    columns = list(table.columns)
    assert columns.index("p_raw" + suffix) == columns.index("p_raw") + 1
    p = table["p_raw"].to_numpy(float)  # two tests: Holm doubles the smaller p; BH doubles it, keeps the larger
    low, high = p.argmin(), p.argmax()
    adjusted = table["p_raw" + suffix].to_numpy(float)
    # float64 arithmetic on float64 p's (one product, one min): a few ulps, inside approx's default rel 1e-6
    assert adjusted[low] == pytest.approx(min(1, 2 * p[low]) if correction == "holm" else min(1, 2 * p[low], p[high]))
    assert adjusted[high] == pytest.approx(max(adjusted[low], p[high]))
    assert any(f"p_raw{suffix}:" in n and "over the 2 tests" in n for n in tables.notes(table))


def test_sc_weat_p_is_two_sided_and_names_the_closer_set(glove, monkeypatch, tmp_path):
    use_tiny_suite(monkeypatch)
    result = run_metric(static(glove, "metric.single_category=true", "stats.n_permutations=500"), tmp_path)
    rows = result.aggregates
    greater = run_metric(
        static(glove, "metric.single_category=true", "stats.n_permutations=500", "stats.alternative=greater"), tmp_path
    ).aggregates
    negative, positive = rows[rows["d"] < 0], rows[rows["d"] > 0]
    assert len(negative) and len(positive)
    assert set(negative.loc[negative["test"] == "W1", "associated_with"]) == {"Unpleasant"}
    assert set(positive.loc[positive["test"] == "W1", "associated_with"]) == {"Pleasant"}
    # a strongly B-associated word gets a small p, as a strongly A-associated one does
    strongest = rows["d"].idxmin()
    assert rows.loc[strongest, "p"] < 0.5 < greater.loc[strongest, "p"]
    # two-sided = 2 x the p towards B, which counts the observed arrangement once more than 1 - p(greater)
    p_min = rows.loc[strongest, "p_min"] / 2
    # p's are float32 ratios of counts (≤ 1): 1 - p + p_min and the doubling round ≤ 4 times, 4·EPS32 < 1e-6
    assert rows.loc[strongest, "p"] == pytest.approx(2 * (1 - greater.loc[strongest, "p"] + p_min), abs=1e-6)
    [(_, table)] = tables.views_of(weat.views, rows, "none")
    assert "associated_with" in table and "permutation test of A ∪ B" in tables.notes(table)[0]


def stereotype_rows(n_templates: int) -> pd.DataFrame:
    per = [
        {
            "template": f"T{i}",
            "score": "set",
            "kendall_tau_overall": 0.11,
            "p_value": 0.04,
            "ci_low": 0.01,
            "ci_high": 0.2,
            "n_trait_pairs": 16,
            "p_at_3_overall": 0.6,
            "kendall_tau_pilot": 0.1 + i,
            "kendall_tau_heldout": 0.1,
            "p_at_3_pilot": 0.5,
            "p_at_3_heldout": 0.6,
            "n_groups": 25,
            "tau_permutations": 10000,
            "tau_bootstrap": 10000,
            "confidence": 0.95,
        }
        for i in range(n_templates)
    ]
    chosen = [{"template_selection": "best template on the pilot groups", "template": "T0"}]
    if n_templates > 1:
        chosen.append({"template_selection": f"mean over {n_templates} templates", "template": ""})
    return pd.concat([pd.DataFrame(per), pd.DataFrame(chosen)], ignore_index=True)


def test_tau_has_its_p_ci_and_n_and_one_template_has_no_mean_row():
    views = tables.views_of(stereotypes.views, stereotype_rows(1), "none")
    assert [title for title, _ in views] == ["per template"]  # one template: no held-out repeat of its row
    shown = tables.present(views[0][1])
    assert list(shown.columns[:7]) == [
        "template",
        "n_groups",
        "n_trait_pairs",
        "kendall_tau_overall",
        "ci",
        "p_value",
        "p_at_3_overall",
    ]
    assert shown.loc[0, "ci"] == "[0.010, 0.200]" and shown.loc[0, "p_value"] == "0.040 *"
    assert "10,000 permutations of the model's scores within each group" in tables.notes(views[0][1])[0]
    two = tables.views_of(stereotypes.views, stereotype_rows(2), "holm")
    assert [title for title, _ in two] == ["per template", "held-out groups"]
    assert "p_value_holm" in two[0][1]


def test_unstereo_subsets_are_named_by_eta_and_units_are_stated():
    rows = pd.DataFrame(
        {"subset": ["unconstrained", "0.3", "0.65"], "n": [500, 186, 433], "us_score": [12.0, 12.4, 12.0]}
        | {"us_std_error": [1.4, 2.4, 1.6], "preference_disparity": [59.6, 61.8, 62.1]}
        | {"male_rel_ratio": [0.16, 0.15, 0.15], "aufc_log10": [5.03, 5.05, 5.05]}
    )
    [(_, table)] = tables.views_of(unstereo.views, rows, "none")
    assert table["subset"].tolist() == ["all pairs", "D_η, η = 0.3", "D_η, η = 0.65"]
    [note] = tables.notes(table)
    assert "us_score: % of pairs" in note and "percentage points" in note and "log10 units" in note
    assert "−η ≤ MaxPMI ≤ η" in note


def test_notes_reach_markdown_and_survive_concatenation():
    a = tables.with_notes(pd.DataFrame({"test": ["W1"], "p": [0.01]}), "first", "second")
    b = tables.with_notes(pd.DataFrame({"test": ["W2"], "p": [0.2]}), "second", "third")
    both = tables.concat([a, b])
    assert tables.notes(both) == ["first", "second", "third"]
    assert tables.markdown(both).splitlines()[-6:] == ["", "_Note: first_", "", "_Note: second_", "", "_Note: third_"]


def test_an_unknown_correction_is_refused_by_name(glove, tmp_path):
    from jaxassoc.errors import ConfigError

    with pytest.raises(ConfigError, match="stats.correction.*holm"):
        run_metric(static(glove, "stats.correction=bonferroni"), tmp_path)


def test_the_merged_tables_note_counts_every_jobs_tests():
    from jaxassoc.app import tables

    job = pd.DataFrame({"test": ["W1", "W2", "W3"], "d": [0.5, 0.2, 1.1], "p": [0.01, 0.3, 0.002]})
    parts = [tables.corrected(job.copy(), "none") for _ in range(3)]
    assert tables.notes(parts[0]) == [tables.NOT_CORRECTED.format(m=3)]
    merged = tables.concat_jobs(parts)
    assert tables.notes(merged) == [tables.NOT_CORRECTED.format(m=9)]  # 3 jobs x 3 tests, not "the 3 tests"
    holm = tables.concat_jobs([tables.corrected(job.copy(), "holm") for _ in range(2)])
    assert tables.notes(holm) == [
        "p_holm: Holm-adjusted (family-wise error) within each job's tests (2 jobs, 6 tests in this table)"
    ]
    assert tables.notes(tables.concat_jobs(parts[:1])) == [tables.NOT_CORRECTED.format(m=3)]


def test_effects_are_shown_with_significant_digits_so_a_tiny_one_never_reads_zero():
    from jaxassoc.app import tables

    shown = tables.present(pd.DataFrame({"effect": [0.5, -0.0123, 0.00456, -3.2e-5, 0.0, 12.3456]}))
    assert shown["effect"].tolist() == ["0.500", "-0.012", "0.00456", "-3.20e-05", "0", "12.346"]
