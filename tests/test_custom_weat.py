"""``dataset=custom_weat``: users' own WEAT tests from YAML, JSON, CSV or the command line give the same
results as the same tests built in; every bad file is refused naming the file, line, test, set and word."""

import json

import pandas as pd
import pytest
import yaml
from app_helpers import compose_config, run_metric, start_hydra, tiny_suite, use_tiny_suite, write_tiny_glove

from jaxassoc.app.main import make_job
from jaxassoc.data import load_weat_suite
from jaxassoc.data._files import FILES_ROOT
from jaxassoc.data.custom_weat import load_weat_file
from jaxassoc.errors import ConfigError, DataError

STATIC = ["metric=weat", "model=glove-6b-50d", "model.source={glove}", "model.name=tiny", "stats.n_bootstrap=50"]
RESULT_COLUMNS = ["test", "n_x", "n_y", "n_a", "n_b", "lost_words", "d_raw", "p_raw", "S_raw", "p_exact_raw"]


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


def _sets(test):
    return {
        "X": list(test.targets_x),
        "Y": list(test.targets_y),
        "A": list(test.attributes_a),
        "B": list(test.attributes_b),
    }


def _mapping(suite):
    return {t.id: {"name": t.name, **_sets(t)} for t in suite.tests}


def write_suite(path, suite):
    """``suite`` in the format the file's suffix names (docs/datasets.md)."""
    if path.suffix == ".json":
        path.write_text(json.dumps(_mapping(suite), indent=1))
    elif path.suffix == ".yaml":
        path.write_text(yaml.safe_dump(_mapping(suite), sort_keys=False))
    else:
        rows = [(t.id, s, w, t.name) for t in suite.tests for s, words in _sets(t).items() for w in words]
        pd.DataFrame(rows, columns=["test", "set", "word", "name"]).to_csv(path, index=False)
    return path


def _overrides(tmp_path):
    return [o.format(glove=write_tiny_glove(tmp_path / "glove.txt")) for o in STATIC]


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".csv"])
def test_own_file_gives_the_builtin_suites_results(tmp_path, monkeypatch, suffix):
    use_tiny_suite(monkeypatch)
    base = _overrides(tmp_path)
    builtin = run_metric([*base, "dataset=weat_caliskan2017"], tmp_path / "builtin").aggregates
    path = write_suite(tmp_path / f"mine{suffix}", tiny_suite("weat_caliskan2017"))
    own = run_metric([*base, "dataset=custom_weat", f"dataset.path={path}"], tmp_path / "own").aggregates
    pd.testing.assert_frame_equal(own.drop(columns="suite"), builtin.drop(columns="suite"))
    assert set(own["suite"]) == {"mine"}


def test_inline_word_lists_give_the_builtin_tests_result(tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    base = _overrides(tmp_path)
    builtin = run_metric([*base, "dataset=weat_caliskan2017"], tmp_path / "builtin").aggregates
    first = tiny_suite("weat_caliskan2017").tests[0]
    inline = [f"dataset.{s}=[{','.join(words)}]" for s, words in _sets(first).items()]
    own = run_metric([*base, "dataset=custom_weat", "dataset.test=W1", *inline], tmp_path / "own").aggregates
    pd.testing.assert_frame_equal(own[RESULT_COLUMNS], builtin[RESULT_COLUMNS].iloc[:1])  # exact p: same key not needed


def test_json_indented_with_tabs_loads_with_its_lines(tmp_path):
    text = (
        '{\n\t"T1": {\n\t\t"X": ["rose", "tulip"],\n\t\t"Y": ["ant", "moth"],\n\t\t"A": ["love", "joy"],\n'
        '\t\t"B": ["war", "love"]\n\t}\n}\n'
    )
    (tmp_path / "t.json").write_text(text)
    with pytest.raises(DataError, match=r"t\.json, line 6: test 'T1': word 'love' is in both 'A' and 'B'"):
        load_weat_file(tmp_path / "t.json")
    (tmp_path / "t.json").write_text(text.replace('"love"]', '"hate"]'))
    assert load_weat_file(tmp_path / "t.json").tests[0].attributes_b == ("war", "hate")


def test_packaged_suite_file_loads_as_own_tests():
    own = load_weat_file(FILES_ROOT / load_weat_suite("weat_caliskan2017").source)
    assert [_sets(t) for t in own.tests] == [_sets(t) for t in load_weat_suite("weat_caliskan2017").tests]


GOOD = "T1:\n  X: [rose, tulip]\n  Y: [ant, moth]\n  A: [love, joy]\n  B: [war, pain]\n"
BAD_FILES = {
    "empty_set": ("t.yaml", GOOD.replace("[ant, moth]", "[]"), r"t\.yaml, line 3: test 'T1', set Y is empty"),
    "one_word_set": (
        "t.yaml",
        GOOD.replace("[war, pain]", "[war]"),
        r"line 5: test 'T1', set B has one word \('war'\)",
    ),
    "duplicate_in_set": (
        "t.yaml",
        "T1:\n  X:\n    - rose\n    - tulip\n    - rose\n  Y: [ant, moth]\n  A: [love, joy]\n  B: [war, pain]\n",
        r"t\.yaml, line 5: test 'T1': word set 'X' repeats \['rose'\]",
    ),
    "word_in_two_sets": (
        "t.yaml",
        GOOD.replace("[war, pain]", "[war, love]"),
        r"line 5: test 'T1': word 'love' is in both 'A' and 'B'",
    ),
    "missing_set": ("t.yaml", GOOD.replace("  B: [war, pain]\n", ""), r"t\.yaml, line 1: test 'T1' has no set B"),
    "unknown_key": ("t.yaml", GOOD + "  b: [hate, pain]\n", r"line 6: test 'T1' has an unknown key 'b'"),
    "not_a_list": ("t.yaml", GOOD.replace("[love, joy]", "love"), r"line 4: test 'T1', set A must be a list of words"),
    "bad_yaml": ("t.yaml", "T1: [X: a\n", r"t\.yaml, line 2, column 1: not valid YAML"),
    "bad_json": ("t.json", '{"T1": {"X": ["a",]}}', r"t\.json, line 1, column 19: not valid JSON"),
    "empty_file": ("t.yaml", "", r"t\.yaml: the file is empty"),
    "duplicate_test_id": ("t.yaml", GOOD + GOOD, r"t\.yaml, line 6: test id 'T1' appears twice"),
    "duplicate_set_key": ("t.yaml", GOOD + "  X: [lily, daisy]\n", r"line 6: test 'T1': key 'X' appears twice"),
    "csv_missing_column": ("t.csv", "test,set,words\nT1,X,rose\n", r"t\.csv, line 1: no column 'word'"),
    "csv_unknown_set": ("t.csv", "test,set,word\nT1,X,rose\nT1,Z,ant\n", r"t\.csv, line 3: test 'T1': unknown set 'Z'"),
    "csv_blank_row": ("t.csv", "test,set,word\nT1,X,rose\n\nT1,X,tulip\n", r"t\.csv, line 3: a blank row"),
    "csv_word_in_two_sets": (
        "t.csv",
        "test,set,word\n"
        + "".join(
            f"T1,{s},{w}\n"
            for s, w in [
                ("X", "rose"),
                ("X", "tulip"),
                ("Y", "ant"),
                ("Y", "rose"),
                ("A", "love"),
                ("A", "joy"),
                ("B", "war"),
                ("B", "pain"),
            ]
        ),
        r"t\.csv, line 5: test 'T1': word 'rose' is in both 'X' and 'Y'",
    ),
    "csv_missing_set": (
        "t.csv",
        "test,set,word\nT1,X,rose\nT1,X,tulip\nT1,Y,ant\nT1,Y,moth\nT1,A,love\nT1,A,joy\n",
        r"t\.csv, line 2: test 'T1' has no set B",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_weat_file_is_refused_naming_file_line_test_set_and_word(tmp_path, case):
    name, text, message = BAD_FILES[case]
    (tmp_path / name).write_text(text)
    with pytest.raises(DataError, match=message):
        load_weat_file(tmp_path / name)


def test_bad_file_is_refused_before_the_model_loads(tmp_path, no_model):  # noqa: F811
    path = tmp_path / "t.yaml"
    path.write_text(GOOD.replace("[ant, moth]", "[]"))
    with pytest.raises(DataError, match="set Y is empty"):
        run_metric(["metric=weat", "model=glove-6b-50d", "dataset=custom_weat", f"dataset.path={path}"], tmp_path)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["dataset.path=nofile.yaml"], r"dataset.path='nofile.yaml': no such file"),
        (["dataset.path=tests.txt"], r"unknown format '.txt' for WEAT tests; use a .yaml, .yml, .json or .csv"),
        (["dataset.X=[a,b]", "dataset.Y=[c,d]"], r"dataset.A is missing"),
        ([], r"dataset=custom_weat needs dataset.path"),
        (["dataset.path=t.yaml", "dataset.X=[a,b]"], r"dataset.path and dataset.X are both set"),
        (["dataset.path=t.yaml", "dataset.test=W1"], r"dataset.test names the command-line test only"),
    ],
)
def test_bad_custom_weat_options_are_refused_by_name(tmp_path, monkeypatch, no_model, overrides, message):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.yaml").write_text(GOOD)
    (tmp_path / "tests.txt").write_text(GOOD)
    cfg = compose_config(["metric=weat", "model=glove-6b-50d", "dataset=custom_weat", *overrides])
    with pytest.raises(ConfigError, match=message):
        make_job(cfg, tmp_path)


def test_inline_word_set_errors_name_the_command_line(tmp_path, no_model):  # noqa: F811
    inline = ["dataset.X=[rose,tulip]", "dataset.Y=[ant,rose]", "dataset.A=[love,joy]", "dataset.B=[war,pain]"]
    with pytest.raises(DataError, match=r"the command line \(dataset.X, Y, A, B\): test 'T1': word 'rose' is in both"):
        run_metric(["metric=weat", "model=glove-6b-50d", "dataset=custom_weat", *inline], tmp_path)


def test_path_option_on_a_packaged_dataset_is_refused_by_name(tmp_path, no_model):  # noqa: F811
    cfg = compose_config(["metric=weat", "model=glove-6b-50d", "+dataset.path=my_test.yaml"])
    with pytest.raises(
        ConfigError,
        match=r"dataset.path is not an option of dataset=weat_caliskan2017: it would be "
        r"ignored; its options are name, sample",
    ):
        make_job(cfg, tmp_path)


def test_wefe_suite_is_a_dataset_config(tmp_path):
    job = make_job(compose_config(["metric=weat", "model=glove-6b-50d", "dataset=weat_wefe"]), tmp_path)
    assert job.dataset.name == "weat_wefe"


@pytest.mark.slow  # ~6 s (issue 38: the default suite's budget)
def test_cli_runs_own_yaml_file_relative_to_the_working_folder_on_embedded_glove(tmp_path, cli):
    suite = load_weat_suite("weat_caliskan2017")
    write_suite(tmp_path / "my_test.yaml", type(suite)("mine", suite.tests[5:7], "x"))  # W6, W7
    proc = cli(
        "jaxassoc",
        "metric=weat",
        "model=glove-6b-50d",
        "dataset=custom_weat",
        "dataset.path=my_test.yaml",
        "stats.n_bootstrap=50",
        "hydra.run.dir=run",
        "cache_dir=null",
        "quiet=true",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_parquet(tmp_path / "run" / "aggregates.parquet").set_index("test")
    assert list(table.index) == ["W6", "W7"] and (table["suite"] == "my_test").all()
    assert table.loc["W6", "d_raw"] > 1 and table.loc["W6", "p_exact_raw"]  # Caliskan et al.: career/family d 1.8
    assert len(table["prov_dataset_version"].iloc[0]) == 12


def test_the_documented_yaml_example_loads(tmp_path):
    text = (FILES_ROOT.parents[2] / "docs" / "datasets.md").read_text()
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    suite = load_weat_file(_write(tmp_path / "doc.yaml", example))
    assert suite.ids == ("career", "science") and suite.tests[0].x_name == "Male names"
    assert suite.tests[1].name == "science" and suite.tests[1].a_name == "A"


def _write(path, text):
    path.write_text(text)
    return path


def test_rpam_test_on_own_file_gives_the_builtin_suites_results(tmp_path, monkeypatch, tiny_checkpoint):
    use_tiny_suite(monkeypatch)
    lm = tiny_checkpoint("gpt2", n_positions=256)
    base = ["metric=rpam", "template=tp1", f"model.source={lm}", "model.name=tiny", "stats.n_bootstrap=50"]
    builtin = run_metric([*base, "dataset=weat_caliskan2017"], tmp_path / "builtin")
    path = write_suite(tmp_path / "targets.csv", tiny_suite("weat_caliskan2017"))
    own = run_metric([*base, "dataset=custom_weat", f"dataset.path={path}"], tmp_path / "own")
    pd.testing.assert_frame_equal(own.aggregates, builtin.aggregates)
    pd.testing.assert_frame_equal(own.items, builtin.items)
    assert own.provenance["dataset_version"] != builtin.provenance["dataset_version"]


def test_ceat_on_own_file_gives_the_builtin_suites_results(tmp_path, monkeypatch, tiny_checkpoint):
    from app_helpers import write_corpus

    use_tiny_suite(monkeypatch)
    lm = tiny_checkpoint("gpt2", n_positions=256)
    base = [
        "metric=ceat",
        f"model.source={lm}",
        "model.name=tiny",
        f"metric.corpus={write_corpus(tmp_path / 'c.txt')}",
        "metric.n_draws=20",
        "metric.max_contexts=2",
    ]
    builtin = run_metric([*base, "dataset=weat_caliskan2017"], tmp_path / "builtin")
    path = write_suite(tmp_path / "mine.json", tiny_suite("weat_caliskan2017"))
    own = run_metric([*base, "dataset=custom_weat", f"dataset.path={path}"], tmp_path / "own")
    pd.testing.assert_frame_equal(own.aggregates.drop(columns="suite"), builtin.aggregates.drop(columns="suite"))
    assert set(own.aggregates["suite"]) == {"custom_weat"}


def test_two_words_a_set_give_p_one_sixth_and_a_caveat_in_the_table_and_the_log(tmp_path, cli):
    words = ["dataset=custom_weat", "dataset.X=[engineer,programmer]", "dataset.Y=[nurse,teacher]"]
    words += ["dataset.A=[he,man]", "dataset.B=[she,woman]"]
    base = ["metric=weat", "model=glove-6b-50d", *words, "cache_dir=null", "stats.alternative=greater"]
    proc = cli("jaxassoc", *base, "hydra.run.dir=run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_parquet(tmp_path / "run" / "aggregates.parquet").iloc[0]
    # 1/6 from exact counts, stored as float32: 1e-8 off, inside approx's default rel 1e-6
    assert row["p_raw"] == pytest.approx(1 / 6) and row["p_exact_raw"] and row["p_resamples_raw"] == 6
    assert row["p_min"] == pytest.approx(1 / 6) and row["d_raw"] > 0
    assert row["caveat"] == (
        "small test (words: X 2, Y 2, A 2, B 2; 6 partitions): p cannot go below 0.167; its bootstrap CI is unreliable"
    )
    out = proc.stdout + proc.stderr
    assert "small test" in out and "<0.001" not in out and "0.167" in out
    strict = cli("jaxassoc", *base, "stats.ties=strict", "hydra.run.dir=strict", cwd=tmp_path)
    assert strict.returncode == 0, strict.stderr[-3000:]
    assert pd.read_parquet(tmp_path / "strict" / "aggregates.parquet")["p_raw"].iloc[0] == 0.0  # Eq. 4 as printed
    assert "<0.167" in strict.stdout and "*" not in strict.stdout.split("<0.167")[1].split("\n")[0]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["X=[rose,Rose,ROSE,tulip]", "Y=[ant,wasp]", "A=[love,peace]", "B=[hate,war]"],
            "word set 'X' repeats ['ROSE', 'Rose', 'rose'] (one word to the lookup: 'rose')",
        ),
        (
            ["X=[rose,tulip]", "Y=[ant,wasp]", "A=[love,Hate]", "B=[hate,war]"],
            "word ['Hate', 'hate'] (one word to the lookup: 'hate') is in both 'A' and 'B'",
        ),
    ],
)
def test_spellings_a_lower_casing_lookup_merges_are_one_word(tmp_path, cli, sets, message):
    proc = cli(
        "jaxassoc",
        "metric=weat",
        "model=glove-6b-50d",
        "dataset=custom_weat",
        *(f"dataset.{s}" for s in sets),
        "hydra.run.dir=run",
        "cache_dir=null",
        cwd=tmp_path,
    )
    assert proc.returncode != 0 and message in proc.stderr
    assert not (tmp_path / "run" / "results.json").exists()
