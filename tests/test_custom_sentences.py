"""``dataset=custom_sentences``: users' own UnStereoEval templates from a text or CSV file give the same
scores as the same templates built in; bad files are refused naming the file and line."""

import pandas as pd
import pytest
from app_helpers import compose_config, run_metric, start_hydra

from jaxassoc.app.main import make_job
from jaxassoc.data import unstereo
from jaxassoc.data.custom_sentences import load_templates_file
from jaxassoc.errors import ConfigError, DataError, InputError

SCORES = ["M_template", "F_template", "M_logprob", "F_logprob", "FM_logprob", "max_gender_pmi"]


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.fixture(scope="module")
def tiny_lm(tiny_checkpoint):
    return tiny_checkpoint("gpt2", n_positions=256)


@pytest.mark.parametrize("suffix", [".txt", ".csv"])
def test_own_templates_give_the_builtin_datasets_scores(tmp_path, tiny_lm, suffix):
    winogender = unstereo.load_winogender()
    path = tmp_path / f"mine{suffix}"
    if suffix == ".txt":  # MaxPMI recomputed from the PMI table (it reproduces Winogender's shipped values)
        path.write_text("\n".join(winogender["template"]) + "\n")
    else:
        winogender[["template", "max_gender_pmi"]].to_csv(path, index=False)
    base = ["metric=unstereo", f"model.source={tiny_lm}", "model.name=tiny"]
    builtin = run_metric([*base, "dataset=winogender"], tmp_path / "builtin")
    own = run_metric([*base, "dataset=custom_sentences", f"dataset.path={path}"], tmp_path / "own")
    pd.testing.assert_frame_equal(own.aggregates, builtin.aggregates)
    pd.testing.assert_frame_equal(own.items[SCORES], builtin.items[SCORES])


def _file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


BAD = {
    "empty_text": ("t.txt", "", r"t\.txt: no templates"),
    "blank_line": ("t.txt", "{pronoun} ran.\n\n{pronoun} sat.\n", r"t\.txt, line 2: a blank line"),
    "no_pronoun_slot": (
        "t.txt",
        "{pronoun} ran.\nThe dog sat.\n",
        r"t\.txt, line 2: template .*no pronoun placeholder",
    ),
    "csv_missing_column": ("t.csv", "sentence\n{pronoun} ran.\n", r"t\.csv, line 1: no column 'template'"),
    "csv_blank_row": ("t.csv", "template\n{pronoun} ran.\n\n", r"t\.csv, line 3: a blank row"),
    "csv_empty_template": ("t.csv", "template,max_gender_pmi\n ,0.5\n", r"t\.csv, line 2: the template is empty"),
    "csv_bad_pmi": (
        "t.csv",
        "template,max_gender_pmi\n{pronoun} ran.,high\n",
        r"line 2: max_gender_pmi 'high' is not a number",
    ),
    "csv_empty": ("t.csv", "", r"t\.csv: the file is empty"),
    "repeated_template": (
        "t.txt",
        "{pronoun} ran.\n{pronoun} sat.\n{pronoun} ran.\n",
        r"t\.txt, line 3: the template '\{pronoun\} ran\.' is already on line 1; a repeated template would count twice",
    ),
    "repeated_but_for_spaces": (
        "t.txt",
        "{pronoun} ran.\n{pronoun} sat.\n{pronoun}  ran. \n",
        r"t\.txt, line 3: the template '\{pronoun\}  ran\. ' is already on line 1 \(as '\{pronoun\} ran\.': they "
        r"differ only in spaces\)",
    ),
    "csv_repeated_template": ("t.csv", "template\n{pronoun} ran.\n{pronoun} ran.\n", r"t\.csv, line 3: .* on line 2"),
    "cr_line_ends": ("t.txt", "{pronoun} ran.\r{pronoun} sat.\r", r"t\.txt: lines end in a bare carriage return"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_template_file_is_refused_naming_file_and_line(tmp_path, case):
    name, text, message = BAD[case]
    with pytest.raises(DataError, match=message):
        load_templates_file(_file(tmp_path, name, text))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ([], r"dataset=custom_sentences needs dataset.path"),
        (["dataset.path=nofile.txt"], r"dataset.path='nofile.txt': no such file"),
        (["dataset.path=t.json"], r"unknown format '.json' for sentence templates"),
    ],
)
def test_bad_custom_sentences_options_are_refused_by_name(tmp_path, monkeypatch, no_model, overrides, message):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    _file(tmp_path, "t.json", "[]")
    cfg = compose_config(["metric=unstereo", "dataset=custom_sentences", *overrides])
    with pytest.raises(ConfigError, match=message):
        make_job(cfg, tmp_path)


def test_bad_template_file_is_refused_before_the_model_loads(tmp_path, no_model):  # noqa: F811
    path = _file(tmp_path, "t.txt", "{pronoun} ran.\n\n")
    with pytest.raises(DataError, match="line 2: a blank line"):
        run_metric(["metric=unstereo", "dataset=custom_sentences", f"dataset.path={path}"], tmp_path)


def test_a_template_longer_than_the_context_names_its_file_and_line(tmp_path, tiny_checkpoint):
    short = tiny_checkpoint("gpt2")  # a 64-token context
    path = _file(tmp_path, "t.txt", "{pronoun} ran.\n{pronoun} said " + "yes and " * 40 + "no.\n")
    base = ["metric=unstereo", f"model.source={short}", "model.name=tiny", "dataset=custom_sentences"]
    with pytest.raises(InputError, match=r"t\.txt, line 2: the template filled with he/his/him \('He said yes"):
        run_metric([*base, f"dataset.path={path}"], tmp_path / "out")
