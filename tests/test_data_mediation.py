"""Vig et al. 2020's professions and templates (jaxassoc.data.mediation): counts, the authors' male/female
subset files, the registry entry and the errors for malformed user files."""

from __future__ import annotations

import json

import pytest

from jaxassoc import data
from jaxassoc.data import _files
from jaxassoc.data.mediation import (
    FEMALE_STEREO_FILE,
    MALE_STEREO_FILE,
    TEMPLATES,
    Profession,
    VigProfessions,
    load_professions,
    load_templates,
)
from jaxassoc.errors import DataError

# Counted once from the authors' experiment_data/*.json (SOURCE.md): 320 professions; the stereotypical
# score is > 0 for 224, < 0 for 66, 0 for 30; 29 words hold "_". professions_male_stereo.json (229 rows)
# and professions_female_stereo.json (70) are the rows whose definitional + stereotypical score is > 0 / < 0;
# these 10 are on another side than their stereotypical score alone puts them:
SPLIT_NOT_BY_STEREOTYPICAL = {
    "male": {"actor", "dad", "patrolman", "steward", "waiter"},
    "female": {"actress", "cellist", "gardener", "housewife", "protester"},
}


def test_packaged_professions_counts_and_words():
    professions = load_professions()
    assert len(professions) == 320 and len({p.word for p in professions}) == 320
    stereotypes = [p.stereotype for p in professions]
    assert (stereotypes.count("male"), stereotypes.count("female"), stereotypes.count(None)) == (229, 70, 21)
    assert professions[0] == Profession("accountant", 0.0, 0.4)
    assert sum(" " in p.word for p in professions) == 29 and not any("_" in p.word for p in professions)
    assert Profession("adjunct professor", 0.0, 0.5) in professions
    nurse = next(p for p in professions if p.word == "nurse")
    assert nurse.stereotype == "female" and nurse.stereotypical < 0


def test_the_authors_subset_files_are_split_by_definitional_plus_stereotypical():
    professions = load_professions()
    by_word = {p.word: p for p in professions}
    for relative, sign in ((MALE_STEREO_FILE, 1), (FEMALE_STEREO_FILE, -1)):
        subset = [(w.replace("_", " "), d, s) for w, d, s in _files.read_json(relative)]
        expected = [p for p in professions if sign * (p.definitional + p.stereotypical) > 0]
        assert subset == [(p.word, p.definitional, p.stereotypical) for p in expected]
        gender = "male" if sign > 0 else "female"
        assert all(by_word[w].stereotype == gender for w, _, _ in subset)
        other = {w for w, _, s in subset if s * sign <= 0}  # the stereotypical score alone would not say so
        assert other == SPLIT_NOT_BY_STEREOTYPICAL[gender]
    assert len(_files.read_json(MALE_STEREO_FILE)) == 229 and len(_files.read_json(FEMALE_STEREO_FILE)) == 70


def test_the_17_templates_in_the_authors_order():
    assert len(TEMPLATES) == 17 and len(set(TEMPLATES)) == 17
    assert TEMPLATES[0] == "The {} said that" and TEMPLATES[-1] == "The {} yelled because"
    assert sum(t.endswith(" that") for t in TEMPLATES) == 6 and TEMPLATES[12] == "The {} went home because"
    assert all(t.count("{}") == 1 and t.startswith("The {} ") for t in TEMPLATES)
    assert load_templates() == TEMPLATES


def test_registry_loads_the_dataset_with_its_options(tmp_path):
    assert data.dataset_info("vig_professions").version == data.DATASETS["vig_professions"].version
    packaged = data.load_dataset("vig_professions")
    assert isinstance(packaged, VigProfessions) and len(packaged.professions) == 320
    assert packaged.templates == TEMPLATES
    (tmp_path / "p.json").write_text('[["nurse", 0.0, -0.9], ["fire_fighter", 0.1, 0.5], ["clerk", 0, 0]]')
    (tmp_path / "t.txt").write_text("The {} said that\n\n  The {} ran because  \r\n")
    mine = data.load_dataset("vig_professions", path=str(tmp_path / "p.json"), templates=str(tmp_path / "t.txt"))
    assert [p.stereotype for p in mine.professions] == ["female", "male", None]
    assert mine.professions[1].word == "fire fighter" and isinstance(mine.professions[2].stereotypical, float)
    assert mine.templates == ("The {} said that", "The {} ran because")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2", r"p\.json: not valid JSON at line 1"),
        ('{"nurse": [0, 1]}', r"p\.json: expected a non-empty JSON list .* got dict"),
        ("[]", r"p\.json: expected a non-empty JSON list .*\(empty\)"),
        ('[["nurse", 0.0, -0.9], ["clerk", 0.0]]', r"p\.json, entry \[1\]: expected \[profession, definitional"),
        ('[["nurse", 0.0, -0.9], "clerk"]', r"entry \[1\]: expected \[profession"),
        (
            '[["nurse", "0.1", -0.9]]',
            r"entry \[0\]: the definitional score \(field 1\) must be a finite number, got '0.1'",
        ),
        ('[["nurse", 0.0, null]]', r"entry \[0\]: the stereotypical score \(field 2\) .* got None"),
        ('[["nurse", 0.0, true]]', r"entry \[0\]: the stereotypical score \(field 2\) .* got True"),
        ('[["nurse", 0.0, NaN]]', r"entry \[0\]: the stereotypical score .* got nan"),
        ('[["nurse", 0.0, 0.1], ["  ", 0.0, 0.1]]', r"entry \[1\]: the profession \(field 0\) must be a non-empty"),
        ('[["nurse", 0.0, 0.1], [3, 0.0, 0.1]]', r"entry \[1\]: the profession \(field 0\) .* got 3"),
        (
            '[["fire_fighter", 0.0, 0.1], ["nurse", 0.0, -0.1], ["fire fighter", 0.0, 0.1]]',
            r"entry \[2\]: the profession 'fire fighter' is also entry \[0\]",
        ),
    ],
)
def test_malformed_professions_name_file_entry_and_field(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        load_professions(str(path))


def test_missing_or_non_utf8_professions_file(tmp_path):
    with pytest.raises(DataError, match=r"nope\.json: no such file"):
        load_professions(str(tmp_path / "nope.json"))
    (tmp_path / "p.json").write_bytes(json.dumps([["caf\xe9", 0, 1]], ensure_ascii=False).encode("latin-1"))
    with pytest.raises(DataError, match=r"p\.json, line 1, column .* is not UTF-8"):
        load_professions(str(tmp_path / "p.json"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("The {} said that\nThe nurse ran because\n", r"t\.txt, line 2: 'The nurse ran because' must hold exactly one"),
        ("The {} said that\n\nThe {} and the {} ran\n", r"t\.txt, line 3: .* exactly one '\{\}'"),
        ("The {0} said that\n", r"t\.txt, line 1: .* no other brace"),
        ("The {} said {that\n", r"t\.txt, line 1: .* no other brace"),
        ("\n  \n", r"t\.txt: no templates"),
    ],
)
def test_malformed_templates_name_the_line(tmp_path, content, message):
    path = tmp_path / "t.txt"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        load_templates(str(path))
    with pytest.raises(DataError, match=r"none\.txt: no such file"):
        load_templates(str(tmp_path / "none.txt"))
