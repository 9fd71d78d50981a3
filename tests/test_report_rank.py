"""``jaxassoc-report --rank`` ranks models only (issue 27): a ranking is split by settings that can change an
effect size, not by those that cannot (the permutation p's and the CI's options); each rank comes with the
ranks the CIs allow; a single model is not ranked, and the report says so."""

import pandas as pd
import pytest

from jaxassoc.app import report, store


def write_job(root, folder, model, effects, *, stats=None, template=None, lo=0.1, hi=0.1):
    job = root / folder
    job.mkdir(parents=True)
    tests = [f"T{i + 1}" for i in range(len(effects))]
    aggregates = pd.DataFrame(
        {
            "test": tests,
            "effect_size": effects,
            "ci_low": [e - lo for e in effects],
            "ci_high": [e + hi for e in effects],
            "p_value": [0.01] * len(effects),
        }
    )
    config = {"model": {"name": model}, "metric": {"name": "toyrank"}, "dataset": {"name": "d"}}
    if stats:
        config["stats"] = stats
    if template:
        config["template"] = {"name": template}
    provenance = {"config": config, "model": model, "metric": "toyrank"}
    store.write_results(job, aggregates.head(0), aggregates, provenance, {})


def ranking_of(root):
    table = report.gather(root)
    settings = report.job_settings(root, list(dict.fromkeys(table["job"])))
    return report.rank_models(report.sweep_effects(table, settings))


def test_p_value_and_ci_options_do_not_split_a_ranking_and_a_model_counts_once(tmp_path):
    """m1 ran twice, with other permutation and bootstrap counts (same d): one entry, the CI of the run with
    more resamples; the ranking is not split by those options."""
    write_job(tmp_path, "a", "m1", [0.5, 0.2], stats={"n_permutations": 1000, "n_bootstrap": 100}, lo=0.3, hi=0.3)
    write_job(tmp_path, "b", "m1", [0.5, 0.2], stats={"n_permutations": 99, "n_bootstrap": 5000}, lo=0.05, hi=0.05)
    write_job(tmp_path, "c", "m2", [0.1, 0.9], stats={"n_permutations": 1000, "n_bootstrap": 100})
    ranked, overall, unranked = ranking_of(tmp_path)
    assert set(ranked["setting"]) == {""} and unranked.empty
    assert sorted(ranked["model"]) == ["m1", "m1", "m2", "m2"]
    m1 = ranked[ranked["model"] == "m1"].set_index("test")
    assert m1["jobs"].tolist() == [2, 2] and set(m1["job"]) == {"b"}  # 5,000 resamples beat 100
    # the test wrote e - 0.1 in float64: within an ulp of 0.45, inside approx's default rel 1e-6
    assert m1.loc["T1", "lo"] == pytest.approx(0.45)
    assert overall.set_index("model")["mean_rank"].to_dict() == {"m1": 1.5, "m2": 1.5}


def test_settings_that_can_change_d_split_the_ranking(tmp_path):
    for template in ("tp1", "tp2"):
        write_job(tmp_path, f"m1-{template}", "m1", [0.5], template=template)
        write_job(tmp_path, f"m2-{template}", "m2", [0.1 if template == "tp1" else 0.9], template=template)
    ranked, overall, _ = ranking_of(tmp_path)
    ranks = ranked.pivot(index="setting", columns="model", values="rank")
    assert ranks.to_dict("index") == {"template=tp1": {"m1": 2.0, "m2": 1.0}, "template=tp2": {"m1": 1.0, "m2": 2.0}}


def test_jobs_of_one_model_with_different_effects_stay_apart(tmp_path):
    """Settings outside NO_EFFECT_SIZE would split the ranking; if jobs differing only in those inside it
    still measured different effects, neither is silently dropped: each is named by its folder."""
    write_job(tmp_path, "x", "m1", [0.5], stats={"n_permutations": 1000})
    write_job(tmp_path, "y", "m1", [0.7], stats={"n_permutations": 99})
    write_job(tmp_path, "z", "m2", [0.1], stats={"n_permutations": 1000})
    ranked, _, _ = ranking_of(tmp_path)
    assert sorted(ranked["model"]) == ["m1 [x]", "m1 [y]", "m2"]


def test_rank_ranges_tell_apart_only_models_whose_cis_do_not_overlap(tmp_path):
    write_job(tmp_path, "a", "m1", [0.10], lo=0.05, hi=0.05)  # |d| CI [0.05, 0.15]
    write_job(tmp_path, "b", "m2", [-0.20], lo=0.15, hi=0.15)  # [0.05, 0.35]: overlaps m1 and m3
    write_job(tmp_path, "c", "m3", [0.40], lo=0.10, hi=0.10)  # [0.30, 0.50]
    write_job(tmp_path, "d", "m4", [0.05], lo=0.30, hi=0.30)  # crosses 0: [0, 0.35]
    ranked, overall, _ = ranking_of(tmp_path)
    got = ranked.set_index("model")[["rank", "rank_best", "rank_worst"]].astype(float).T.to_dict()
    assert got == {
        "m4": {"rank": 1.0, "rank_best": 1.0, "rank_worst": 4.0},  # nothing lies wholly above [0, 0.35]
        "m1": {"rank": 2.0, "rank_best": 1.0, "rank_worst": 3.0},  # only m3 lies wholly above [0.05, 0.15]
        "m2": {"rank": 3.0, "rank_best": 1.0, "rank_worst": 4.0},
        "m3": {"rank": 4.0, "rank_best": 2.0, "rank_worst": 4.0},  # m1 lies wholly below [0.30, 0.50]
    }
    assert overall.set_index("model")["could_be_1st"].to_dict() == {"m4": 1, "m1": 1, "m2": 1, "m3": 0}


def test_a_single_model_is_not_ranked(tmp_path, capsys):
    write_job(tmp_path, "a", "m1", [0.5, 0.2], stats={"n_permutations": 1000})
    write_job(tmp_path, "b", "m1", [0.5, 0.2], stats={"n_permutations": 99})
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "ranking.csv").write_text("a stale ranking\n")
    report.main([str(tmp_path), "--rank"])
    printed = capsys.readouterr().out
    assert "ranking: Not ranked: the sweep has one model (m1)" in printed
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Not ranked: the sweep has one model (`m1`); a ranking compares two or more models" in text
    assert "mean rank" not in text and not (tmp_path / "report" / "ranking.csv").exists()
    assert "Not ranked: the sweep has one model" in (tmp_path / "report" / "report.html").read_text()


def test_a_comparison_with_one_model_is_left_out_and_named(tmp_path, capsys):
    write_job(tmp_path, "a", "m1", [0.5], template="tp1")
    write_job(tmp_path, "b", "m2", [0.1], template="tp1")
    write_job(tmp_path, "c", "m1", [0.3], template="tp2")  # m2 did not run with tp2
    report.main([str(tmp_path), "--rank"])
    printed = capsys.readouterr().out
    assert "not ranked (one model):\n  toyrank (template=tp2): only `m1` (T1)" in printed
    text = (tmp_path / "report" / "report.md").read_text()
    assert "Not ranked, one model only:\n\n- toyrank (template=tp2): only `m1` (T1)" in text
    assert "### toyrank (template=tp1): rank by |effect size| (1 = smallest)" in text
    assert "template=tp2): rank by" not in text
