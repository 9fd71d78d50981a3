"""metric=seat through Hydra on a tiny BERT: the default dataset and a custom_weat file, pooling by model
kind, the tables, and the bad inputs (an empty set in a file, a word the encoder cannot represent)."""

import pytest
from app_helpers import run_metric, start_hydra, use_tiny_suite

from jaxassoc.app import tables
from jaxassoc.app.tasks import seat
from jaxassoc.data import load_seat_templates
from jaxassoc.errors import DataError, InputError

GOOD = "T1:\n  X: [rose, tulip]\n  Y: [ant, moth]\n  A: [love, peace]\n  B: [war, pain]\n"


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.fixture(scope="module")
def overrides(tiny_checkpoint):
    folder = tiny_checkpoint("bert")
    return ["metric=seat", "model=bert-base-cased", f"model.source={folder}", "model.name=tiny", "stats.n_bootstrap=50"]


@pytest.mark.slow  # three SEAT jobs on a tiny BERT: ~9 s (issue 38: the default suite's budget)
def test_default_dataset_runs_with_first_token_pooling_and_its_table(tmp_path, monkeypatch, overrides):
    use_tiny_suite(monkeypatch, x=("rose", "tulip", "daisy", "lily"))
    result = run_metric(overrides, tmp_path)
    table = result.aggregates.set_index("test")
    templates = load_seat_templates()
    assert list(table.index) == ["W1", "W2"] and (table["pooling"] == "first").all()  # masked: [CLS]
    assert table.loc["W1", "n_x"] == 4 * len(templates.templates["noun"]) and table.loc["W1", "words_x"] == 4
    # A random tiny BERT's [CLS] barely depends on the sentence (cosines ~0.99999): d may be undefined, and
    # then the table says why.
    assert (table["d"].notna() | table["undefined_reason"].str.contains("the same for every target")).all()
    assert result.provenance["templates_version"] and result.provenance["dataset_version"]
    [(title, view)] = seat.views(result.aggregates)
    assert title == "tests" and {"d", "words_x", "permutations"} <= set(view.columns)
    assert "sentences" in tables.console([(title, view)])
    mean = run_metric([*overrides, "metric.pooling=mean"], tmp_path / "mean").aggregates
    assert (mean["pooling"] == "mean").all() and mean["d"].notna().all() and mean["p_value"].between(0, 1).all()
    assert not mean["d"].equals(result.aggregates["d"])
    words = run_metric([*overrides, "metric.pooling=mean", "stats.unit=word"], tmp_path / "words").aggregates
    assert (words["ci_unit"] == "word").all() and (mean["ci_unit"] == "sentence").all()
    assert words["d"].tolist() == mean["d"].tolist() and not words["ci_low"].equals(mean["ci_low"])
    [(_, shown)] = seat.views(words)
    assert "target words within X and within Y, each with all its sentences" in " ".join(tables.notes(shown))


def test_custom_file_an_empty_set_and_an_unrepresentable_word_are_refused_by_name(tmp_path, overrides):
    path = tmp_path / "t.yaml"
    path.write_text(GOOD)
    own = run_metric([*overrides, "dataset=custom_weat", f"dataset.path={path}"], tmp_path / "own").aggregates
    assert own["test"].tolist() == ["T1"] and own["n_a"].tolist() == [10]  # 2 mass nouns x 5 templates
    path.write_text(GOOD.replace("[ant, moth]", "[]"))
    with pytest.raises(DataError, match=r"t\.yaml.*set Y is empty"):
        run_metric([*overrides, "dataset=custom_weat", f"dataset.path={path}"], tmp_path / "empty")
    path.write_text(GOOD.replace("[war, pain]", "[war, pain☃]"))
    with pytest.raises(InputError, match=r"test T1: word set 'B': .*'pain☃'"):
        run_metric([*overrides, "dataset=custom_weat", f"dataset.path={path}"], tmp_path / "unk")
