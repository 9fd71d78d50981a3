"""Every item counted once (issue 38): a repeated CrowS-Pairs pair (as written, but for spaces, or as the
model's tokenizer reads it), a pair whose two sentences are one, a StereoSet example whose stereotype and
anti-stereotype are one and a CSV column named twice are refused naming the file and the line(s); repeated
pair ids and unknown bias types are warnings."""

from __future__ import annotations

import logging
import types

import family_specs
import pandas as pd
import pytest

from jaxassoc.data.crows_pairs import load_crows_pairs, parse_crows_pairs
from jaxassoc.data.custom_sentences import load_templates_file
from jaxassoc.data.custom_weat import load_weat_file
from jaxassoc.data.stereoset import parse_stereoset
from jaxassoc.errors import DataError, InputError
from jaxassoc.readouts.crows_pairs import check_distinct_pairs, score_pairs

HEADER = ",sent_more,sent_less,stereo_antistereo,bias_type\n"
DOCTOR = "0,The doctor said that he would help.,The doctor said that she would help.,stereo,gender\n"
MATH = "1,She studies math.,He studies math.,antistereo,gender\n"


def _pairs(*rows: tuple[str, str]) -> pd.DataFrame:
    text = HEADER + "".join(f'{i},"{more}","{less}",stereo,gender\n' for i, (more, less) in enumerate(rows))
    return parse_crows_pairs(text, "my.csv")


@pytest.mark.parametrize(
    "repeat,words",
    [
        (DOCTOR.replace("0,", "2,", 1), ["my.csv, line 4", "is already on line 2", "list it once"]),
        (
            DOCTOR.replace("0,", "2,", 1).replace("said that he", "said  that he "),
            ["my.csv, line 4", "is already on line 2", "they differ only in spaces"],
        ),
    ],
    ids=["as_written", "but_for_spaces"],
)
def test_a_repeated_pair_is_refused_naming_both_lines(repeat, words):
    with pytest.raises(DataError) as error:
        parse_crows_pairs(HEADER + DOCTOR + MATH + repeat, "my.csv")
    for word in words:
        assert word in str(error.value)


def test_a_repeated_pair_in_the_packaged_file_is_a_warning_and_one_copy_is_kept(caplog):
    with caplog.at_level(logging.WARNING, logger="jaxassoc.data.crows_pairs"):
        pairs = load_crows_pairs()
    muslims = pairs["sent_more"].str.startswith("I'm sorry but those people are Muslims")
    assert len(pairs) == 1507 and muslims.sum() == 1 and pairs.loc[muslims, "line"].tolist() == [1462]
    assert not pairs.duplicated(["sent_more", "sent_less"]).any() and pairs["pair"].is_unique
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "crows_pairs_anonymized.csv, line 1505" in warning and "already on line 1462" in warning
    assert "keeping the first copy only" in warning


def test_a_pair_differing_only_in_spaces_is_refused_naming_the_line():
    with pytest.raises(DataError, match=r"my\.csv, line 3 \(pair 1\): sent_more and sent_less differ only in spaces"):
        _pairs(("He studies math.", "She studies math."), ("He studies math.", "He  studies math. "))


def _uncased_bert(tiny_checkpoint):
    from jaxassoc.models.loading import load_model

    return load_model(tiny_checkpoint("bert"))


def test_a_pair_the_tokenizer_reads_as_one_is_refused_before_any_forward(tiny_checkpoint, monkeypatch):
    model = _uncased_bert(tiny_checkpoint)
    pairs = _pairs(("He studies math.", "She studies math."), ("He studies math.", "he studies math."))

    def forward(*_, **__):
        raise AssertionError("a forward pass ran before the check")

    monkeypatch.setattr("jaxassoc.readouts.crows_pairs.pseudo_log_likelihoods", forward)
    with pytest.raises(InputError) as error:
        score_pairs(model, pairs, source="my.csv")
    message = str(error.value)
    assert (
        message.startswith("my.csv, line 3 (pair 1): the tokenizer of") and "reads sent_more and sent_less" in message
    )
    assert "'He studies math.' / 'he studies math.'" in message


def test_two_pairs_the_tokenizer_reads_as_one_are_refused_naming_both_lines(tiny_checkpoint):
    model = _uncased_bert(tiny_checkpoint)
    pairs = _pairs(
        ("He studies math.", "She studies math."),
        ("The doctor said that he would help.", "The doctor said that she would help."),
        ("he studies math.", "she studies math."),
    )
    with pytest.raises(InputError) as error:
        check_distinct_pairs(model, pairs, "my.csv")
    message = str(error.value)
    assert (
        message.startswith("my.csv, line 4 (pair 2): the tokenizer of") and "as the pair on line 2 (pair 0)" in message
    )
    assert "would count twice" in message


def test_a_cased_tokenizer_keeps_case_pairs_apart():
    model = types.SimpleNamespace(tokenizer=family_specs.tiny_tokenizer("gpt2"), name="tiny")
    pairs = _pairs(("He studies math.", "he studies math."), ("She studies math.", "she studies math."))
    check_distinct_pairs(model, pairs, "my.csv")  # GPT-2's tokenizer keeps case: nothing to refuse


def test_the_app_refuses_a_pair_the_tokenizer_merges_before_the_first_chunk(
    tmp_path, tiny_checkpoint, cli, monkeypatch
):
    def forward(*_, **__):
        raise AssertionError("a forward pass ran before the check")

    monkeypatch.setattr("jaxassoc.readouts.crows_pairs.pseudo_log_likelihoods", forward)
    (tmp_path / "pairs.csv").write_text(HEADER + DOCTOR + MATH + "2,She studies art.,she studies art.,stereo,gender\n")
    proc = cli(
        "jaxassoc",
        "metric=crows_pairs",
        "model.name=tiny",
        "model.kind=masked",
        f"model.source={tiny_checkpoint('bert')}",
        "dataset.path=pairs.csv",
        "metric.chunk_pairs=1",
        "hydra.run.dir=out",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    assert proc.returncode != 0
    assert "pairs.csv, line 4 (pair 2): the tokenizer of 'tiny' reads sent_more and sent_less" in proc.stderr


def _example(stereotype: str, anti: str) -> dict:
    sentences = [
        ("s1", stereotype, "stereotype"),
        ("s2", anti, "anti-stereotype"),
        ("s3", "The chess player was cat.", "unrelated"),
    ]
    return {
        "id": "ex7",
        "target": "chess player",
        "bias_type": "profession",
        "context": "The chess player was BLANK.",
        "sentences": [{"id": i, "sentence": s, "gold_label": g} for i, s, g in sentences],
    }


@pytest.mark.parametrize(
    "anti,words",
    [("The chess player was nerdy.", []), ("The chess player was nerdy. ", ["they differ only in spaces"])],
    ids=["same", "but_for_spaces"],
)
def test_a_stereoset_example_whose_stereotype_is_its_anti_stereotype_is_refused(anti, words):
    document = {"data": {"intrasentence": [_example("The chess player was nerdy.", anti)]}}
    with pytest.raises(DataError) as error:
        parse_stereoset(document, "dev.json")
    message = str(error.value)
    assert message.startswith("dev.json: data.intrasentence[0] (id ex7), sentences[1]: the anti-stereotype sentence")
    for word in ["is the stereotype one (sentences[0])", *words]:
        assert word in message


@pytest.mark.parametrize(
    "name,text,load",
    [
        ("pairs.csv", HEADER.replace("bias_type", "bias_type,sent_less") + "0,a b,a c,stereo,x,a d\n", None),
        ("t.csv", "template,max_gender_pmi,template\n{pronoun} ran.,0.1,{pronoun} sat.\n", load_templates_file),
        ("w.csv", "test,set,word,word\nT,X,rose,tulip\n", load_weat_file),
    ],
    ids=["crows_pairs", "custom_sentences", "custom_weat"],
)
def test_a_csv_header_naming_a_column_twice_is_refused(tmp_path, name, text, load):
    path = tmp_path / name
    path.write_text(text)
    repeated = {"pairs.csv": "sent_less", "t.csv": "template", "w.csv": "word"}[name]
    with pytest.raises(DataError, match=rf"{name}, line 1: the header names the column '{repeated}' twice"):
        load(path) if load else load_crows_pairs(path)


def test_repeated_pair_ids_and_unknown_bias_types_are_warned_not_refused(caplog):
    text = HEADER + DOCTOR + MATH.replace("1,", "0,", 1) + "2,The old man ran.,The young man ran.,stereo,agee\n"
    with caplog.at_level(logging.WARNING, logger="jaxassoc.data.crows_pairs"):
        pairs = parse_crows_pairs(text, "my.csv")
    assert len(pairs) == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(w.startswith("my.csv, lines 2, 3: the pair id '0' is given to 2 pairs") for w in warnings), warnings
    assert any(w.startswith("my.csv, line 4: bias_type 'agee' is not one of CrowS-Pairs' nine") for w in warnings)
    assert len(warnings) == 2  # 'gender' is one of the nine


def test_a_pair_listed_again_with_its_sentences_swapped_is_refused_naming_both_lines():
    with pytest.raises(DataError, match=r"my\.csv, line 3 \(pair 1\): the pair .* is the pair on line 2 with "
                       r"sent_more and sent_less swapped"):  # fmt: skip
        _pairs(("He studies math.", "She studies math."), ("She studies math.", "He studies math."))
