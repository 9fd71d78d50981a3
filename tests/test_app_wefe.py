"""``metric=wefe`` (docs/methods.md §9) end to end on tiny GloVe-format vectors and the tiny two-test suite:
rows per test and metric equal the metrics on the looked-up vectors, per-word items, readable views,
named errors for sets the vocabulary empties, and ``jaxassoc-report --rank`` ranking models per WEFE metric."""

import numpy as np
import pandas as pd
import pytest
from app_helpers import (
    FLOWERS,
    INSECTS,
    PLEASANT,
    UNPLEASANT,
    compose_config,
    start_hydra,
    use_tiny_suite,
    write_tiny_glove,
)

from jaxassoc.app import report, tables
from jaxassoc.app.main import run_job
from jaxassoc.app.tasks import wefe as wefe_task
from jaxassoc.errors import ConfigError, InputError


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.fixture(scope="module")
def glove(tmp_path_factory):
    return write_tiny_glove(tmp_path_factory.mktemp("glove") / "tiny.txt")


def vectors_of(glove, words):
    table = {line.split()[0]: np.array(line.split()[1:], float) for line in glove.read_text().splitlines()}
    return np.stack([table[w] for w in words if w in table])


def run(glove, out, *extra, model="tiny"):
    # 100 resamples for the scores' word-bootstrap CIs unless a test asks for more: only one test reads them
    resamples = [] if any(e.startswith("stats.n_bootstrap=") for e in extra) else ["stats.n_bootstrap=100"]
    overrides = ["metric=wefe", "model=glove-6b-50d", f"model.source={glove}", f"model.name={model}", *resamples]
    overrides += list(extra)
    return run_job(compose_config(overrides), out)


def test_wefe_job_rows_items_and_views(glove, tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    result = run(glove, tmp_path / "run")
    rows = result.aggregates
    w1 = rows[rows["test"] == "W1"].set_index("series")
    assert list(w1.index) == ["RND (A)", "RND (B)", "RNSB", "MAC", "ECT (A)", "ECT (B)", "RIPA (A)", "RIPA (B)"]
    assert w1.loc["RND (A)", "lost_words"] == "zinnia" and w1.loc["RND (A)", "n_x"] == 4
    x, y = vectors_of(glove, FLOWERS), vectors_of(glove, INSECTS)
    a, b = vectors_of(glove, PLEASANT), vectors_of(glove, UNPLEASANT)
    rnd_a = np.mean([np.linalg.norm(v - x.mean(0)) - np.linalg.norm(v - y.mean(0)) for v in a])
    assert w1.loc["RND (A)", "score"] == pytest.approx(rnd_a, rel=1e-4)
    cos = lambda u, v: u @ v / np.linalg.norm(u) / np.linalg.norm(v)  # noqa: E731
    mac = np.mean([[np.mean([1 - cos(t, v) for v in s]) for s in (a, b)] for t in np.concatenate([x, y])])
    assert w1.loc["MAC", "score"] == pytest.approx(mac, rel=1e-4)
    assert w1.loc["MAC", "effect_size"] == pytest.approx(1 - mac, rel=1e-4)
    relation = [(p - q) / np.linalg.norm(p - q) for p, q in zip(x, y)]  # 4 pairs: the first 4 of each
    ripa_b = np.mean([[v @ r for r in relation] for v in b])
    assert w1.loc["RIPA (B)", "score"] == pytest.approx(ripa_b, rel=1e-4) and w1.loc["RIPA (B)", "n_pairs"] == 4
    assert 0 <= w1.loc["RNSB", "accuracy"] <= 1 and w1.loc["RNSB", "score"] >= 0

    items = result.items
    rnsb = items[(items["test"] == "W1") & (items["metric"] == "RNSB")]
    assert list(rnsb["word"]) == ["rose", "tulip", "daisy", "lily", *INSECTS]
    assert list(
        items[(items["test"] == "W1") & (items["metric"] == "RIPA") & (items["attributes"] == "A")]["word"]
    ) == list(PLEASANT)

    views = wefe_task.views(rows)
    wide = views[0][1]
    assert list(wide["test"]) == ["W1", "W2"] and "RNSB" in wide and "ECT (B)" in wide
    assert "RIPA (A)" in tables.console(views)


@pytest.mark.slow  # two WEFE jobs: ~6 s (issue 38: the default suite's budget)
def test_seed_decides_rnsb_split_and_the_rest_is_seed_free(glove, tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    one = run(glove, tmp_path / "a", "seed=1").aggregates.set_index(["test", "series"])
    again = run(glove, tmp_path / "b", "seed=1").aggregates.set_index(["test", "series"])
    pd.testing.assert_frame_equal(one, again)
    other = run(glove, tmp_path / "c", "seed=2", "metric.metrics=[rnsb,mac]").aggregates.set_index(["test", "series"])
    assert sorted(set(other.index.get_level_values("series"))) == ["MAC", "RNSB"]
    assert other.loc[("W1", "MAC"), "score"] == one.loc[("W1", "MAC"), "score"]


def test_a_custom_weat_file_whose_set_the_vocabulary_empties_is_named(glove, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "T1:\n  X: [rose, tulip]\n  Y: [ant, moth]\n  A: [love, joy]\n  B: [qwzx, zinnia]\n"
        "  labels: {X: Flowers, Y: Insects, A: Pleasant, B: Nonsense}\n"
    )
    with pytest.raises(InputError, match=rf"{path}, test 'T1': 'T1 Nonsense': no word of it is in the vocabulary"):
        run(glove, tmp_path / "run", "dataset=custom_weat", f"dataset.path={path}")


def test_unused_and_bad_options_are_refused(glove, tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    with pytest.raises(ConfigError, match="metric.layer"):
        run(glove, tmp_path / "a", "metric.layer=3")
    with pytest.raises(ConfigError, match="metric.rnd_distance"):
        run(glove, tmp_path / "b", "metric.metrics=[mac]", "metric.rnd_distance=cos")
    with pytest.raises(ConfigError, match="metric.metrics='weat' is not supported"):
        run(glove, tmp_path / "c", "metric.metrics=[weat]")


@pytest.mark.slow  # two WEFE jobs and a report: ~5 s (issue 38: the default suite's budget)
def test_report_ranks_models_per_wefe_metric(glove, tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    other = write_tiny_glove(tmp_path / "other.txt", dim=6)
    sweep = tmp_path / "sweep"
    run(glove, sweep / "0", "metric.metrics=[rnd,ect]", model="tiny-a")
    run(other, sweep / "1", "metric.metrics=[rnd,ect]", model="tiny-b")
    table = report.gather(sweep)
    settings = report.job_settings(sweep, list(dict.fromkeys(table["job"])))
    ranking = report.rank_models(report.sweep_effects(table, settings))
    ranked = ranking.ranked
    assert set(ranked["series"]) == {"RND (A)", "RND (B)", "ECT (A)", "ECT (B)"}
    for (series, test), group in ranked.groupby(["series", "test"]):  # per metric, subquery and test
        np.testing.assert_array_equal(group["rank"], group["abs_effect"].rank(method="average"))
        if series.startswith("RND"):  # continuous: no ties between the two models
            assert sorted(group["rank"]) == [1.0, 2.0]
    ect = ranked[ranked["series"] == "ECT (A)"]
    scores = table[table["series"] == "ECT (A)"]["score"].to_numpy()
    np.testing.assert_allclose(np.sort(ect["effect"]), np.sort(1 - scores), rtol=1e-6)
    assert len(ranking.overall) == 8  # 4 series x 2 models


def test_every_wefe_score_has_a_word_bootstrap_ci_like_a_numpy_bootstrap(glove, tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    result = run(glove, tmp_path / "run", "stats.n_bootstrap=2000", "stats.confidence=0.9")
    rows = result.aggregates
    assert rows[["ci_low", "ci_high"]].notna().all().all()
    rnsb = rows["metric"] == "RNSB"  # it refits a classifier per resample: at most 1,000
    assert (rows.loc[~rnsb, "n_bootstrap"] == 2000).all() and (rows.loc[rnsb, "n_bootstrap"] == 1000).all()
    assert (rows["ci_low"] <= rows["ci_high"]).all()
    mac = rows[rows["series"] == "MAC"].iloc[0]  # the CI is of effect_size: 1 - MAC, 1 - ECT
    assert mac["ci_low"] < mac["effect_size"] + 0.5 and mac["ci_high"] > mac["effect_size"] - 0.5
    w1 = rows[rows["test"] == "W1"].set_index("series")
    # RND (A) against a NumPy bootstrap: X, Y and A each resampled within itself, 20,000 resamples
    x, y, a = vectors_of(glove, FLOWERS), vectors_of(glove, INSECTS), vectors_of(glove, PLEASANT)
    rng = np.random.default_rng(0)
    draws = []
    for _ in range(20_000):
        xs, ys, as_ = (s[rng.integers(0, len(s), len(s))] for s in (x, y, a))
        draws.append(np.mean(np.linalg.norm(as_ - xs.mean(0), axis=1) - np.linalg.norm(as_ - ys.mean(0), axis=1)))
    low, high = np.quantile(draws, [0.05, 0.95])
    width = high - low
    # percentile bounds from 2,000 resamples: their Monte Carlo SD is about 3 % of the width; 15 % is 5 SD
    assert w1.loc["RND (A)", "ci_low"] == pytest.approx(low, abs=0.15 * width)
    assert w1.loc["RND (A)", "ci_high"] == pytest.approx(high, abs=0.15 * width)
    # the tiny suite's sets of 3 to 5 words: every row's CI carries the small-sample caveat
    assert rows["caveat"].str.contains("its bootstrap CI is unreliable").all()
    shown = dict(wefe_task.views(rows))["queries"]
    assert "ci_low" in shown and any("percentile bootstrap over words" in n for n in tables.notes(shown))
