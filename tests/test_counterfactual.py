"""Attribute word lists per bias type and counterfactual sentences for fitting concept erasers
(jaxassoc.data.counterfactual)."""

import json

import numpy as np
import pytest

from jaxassoc import data
from jaxassoc.data import counterfactual as cf
from jaxassoc.data._files import data_path
from jaxassoc.errors import DataError

EXPECTED_CLASSES = {
    "gender": ("male", "female"),
    "race": ("black", "white", "asian"),
    "religion": ("christian", "jewish", "muslim"),
}


def _write(tmp_path, payload, name="mine.json"):
    path = tmp_path / name
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload), encoding="utf-8")
    return path


# --- word lists --------------------------------------------------------------------------------------


@pytest.mark.parametrize("bias_type", cf.BIAS_TYPES)
def test_packaged_lists_are_well_formed(bias_type):
    words = data.load_attribute_words(bias_type)
    assert words.bias_type == bias_type and words.classes == EXPECTED_CLASSES[bias_type]
    assert len(words.tuples) >= (40 if bias_type == "gender" else 10)
    assert all(len(t) == len(words.classes) for t in words.tuples)
    # the raw file is lower case, one token a word, and no word is in two classes
    raw = json.loads((data_path(cf.MITIGATION_FILES[bias_type])).read_text(encoding="utf-8"))
    assert [tuple(t) for t in raw["tuples"]] == list(words.tuples)
    assert all(w == w.lower() and w.split() == [w] for t in words.tuples for w in t)
    owner = {}
    for t in words.tuples:
        for c, w in enumerate(t):
            assert owner.setdefault(w, c) == c, w
    assert len(set(words.tuples)) == len(words.tuples)


def test_gender_list_has_the_basic_pairs():
    tuples = set(data.load_attribute_words("gender").tuples)
    for pair in [("he", "she"), ("his", "her"), ("him", "her"), ("man", "woman"), ("king", "queen"), ("mr", "mrs")]:
        assert pair in tuples


def test_a_users_file_loads_like_the_packaged_one(tmp_path):
    path = _write(tmp_path, {"classes": ["a", "b"], "tuples": [["Cat", "dog"], ["cats", "dogs"]]})
    words = data.load_attribute_words(path)
    assert words.bias_type == "mine" and words.classes == ("a", "b")
    assert words.tuples == (("cat", "dog"), ("cats", "dogs"))  # lower-cased
    assert str(path) in words.source
    assert data.load_attribute_words(str(path)).tuples == words.tuples


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"classes": ["a"], "tuples": [["x"]]}, "give at least two"),
        ({"classes": ["a", "b"], "tuples": [["x", "y"], ["z"]]}, r"tuples\[1\] \['z'\] has 1 words but there are 2"),
        ({"classes": ["a", "b"], "tuples": [["x", "y"], ["y", "z"]]}, "'y' is in two classes, 'b' and 'a'"),
        ({"classes": ["a", "b"], "tuples": [["x", "two words"]]}, "'two words' must be one non-empty token"),
        ({"classes": ["a", "a"], "tuples": [["x", "y"]]}, "names a class twice"),
        ({"tuples": [["x", "y"]]}, "keys 'classes' and 'tuples'"),
        ("[1, 2", "is not valid JSON at line 1"),
    ],
)
def test_bad_user_files_are_refused_naming_the_file(tmp_path, payload, message):
    path = _write(tmp_path, payload)
    with pytest.raises(DataError, match=message) as info:
        data.load_attribute_words(path)
    assert str(path) in str(info.value)


def test_unknown_bias_type_lists_the_choices():
    with pytest.raises(DataError, match=r"unknown bias type 'gendre'.*\['gender', 'race', 'religion'\]"):
        data.load_attribute_words("gendre")


def test_not_a_json_file_and_a_missing_file(tmp_path):
    path = _write(tmp_path, "he she\n", name="words.txt")
    with pytest.raises(DataError, match=r"words\.txt is not a JSON file"):
        data.load_attribute_words(path)
    with pytest.raises(DataError, match=r"nope\.json does not exist"):
        data.load_attribute_words(tmp_path / "nope.json")


# --- counterfactual sentences ------------------------------------------------------------------------------

GENDER = cf.load_attribute_words("gender")


def test_swaps_keep_capitalisation_and_punctuation():
    out = data.counterfactual_sentences(['He said, "HE is my father\'s son." Mr. Smith', "She ran."], GENDER)
    assert out.tuples[0] == (
        'He said, "HE is my father\'s son." Mr. Smith',
        'She said, "SHE is my mother\'s daughter." Mrs. Smith',
    )
    assert out.tuples[1] == ("He ran.", "She ran.")
    assert out.labels.tolist() == [0, 1] and out.labels.dtype == np.int32
    assert out.originals == ('He said, "HE is my father\'s son." Mr. Smith', "She ran.")
    assert out.sentences(1) == ('She said, "SHE is my mother\'s daughter." Mrs. Smith', "She ran.")


def test_hyphenated_words_keep_each_parts_capital():
    race = data.load_attribute_words("race")
    out = data.counterfactual_sentences(["An African-American church .", "white paint"], race)
    assert out.tuples[0] == (
        "An African-American church .",
        "An European-American church .",
        "An Asian-American church .",
    )
    assert out.labels.tolist() == [0, 1]


def test_whole_tokens_only_and_sentences_with_two_classes_are_skipped():
    sentences = [
        "The theme was heroic .",  # "heroic" is not "hero"
        "He met her .",  # male and female: skipped
        "Shepherds sing .",  # "she" inside a word: not a match
        "His dog .",
        "Her cat .",
    ]
    out = data.counterfactual_sentences(sentences, GENDER, corpus="toy")
    assert out.originals == ("His dog .", "Her cat .")
    assert out.tuples[1] == ("His cat .", "Her cat .")  # "her" swaps by its first tuple, his/her
    assert out.corpus == "toy" and out.classes == ("male", "female") and out.bias_type == "gender"


def test_copy_for_each_class_in_class_order():
    religion = data.load_attribute_words("religion")
    out = data.counterfactual_sentences(["The mosque and the imam .", "A church ."], religion)
    assert out.tuples[0] == (
        "The church and the priest .",
        "The synagogue and the rabbi .",
        "The mosque and the imam .",
    )
    assert out.labels.tolist() == [2, 0]
    for row, label in zip(out.tuples, out.labels):
        assert len(row) == 3 and row[label] in ("The mosque and the imam .", "A church .")


def test_max_sentences_keeps_the_first_ones_and_is_deterministic():
    sentences = [f"{w} number {i} ." for i, w in enumerate(["He", "She", "x", "Him", "Her", "His"])]
    full = data.counterfactual_sentences(sentences, GENDER)
    first = data.counterfactual_sentences(sentences, GENDER, max_sentences=3)
    assert len(full) == 5 and len(first) == 3
    assert first.tuples == full.tuples[:3] and first.labels.tolist() == full.labels[:3].tolist()
    again = data.counterfactual_sentences(sentences, GENDER)
    assert again.tuples == full.tuples and np.array_equal(again.labels, full.labels)
    with pytest.raises(DataError, match="max_sentences"):
        data.counterfactual_sentences(sentences, GENDER, max_sentences=0)


def test_absent_words_and_a_single_class_are_refused_naming_the_corpus():
    with pytest.raises(DataError, match=r"attribute words absent from the corpus.*my corpus.*'gender'"):
        data.counterfactual_sentences(["A cat sat .", "The dog ran ."], GENDER, corpus="my corpus")
    with pytest.raises(DataError, match=r"only the class 'male' of the 'gender' lists.*is present in my corpus"):
        data.counterfactual_sentences(["He sat .", "His dog ."], GENDER, corpus="my corpus")


def test_fitting_corpus_is_wikitext2_valid_or_a_users_file(tmp_path):
    assert cf.fitting_sentences() == data.wikitext2_sentences("valid", detokenize=True)
    assert cf.fitting_sentences() != data.wikitext2_sentences("test", detokenize=True)
    path = tmp_path / "corpus.txt"
    path.write_text("He ran.\n\nShe sat.\n", encoding="utf-8")
    assert cf.fitting_sentences(path) == ["He ran.", "She sat."]
    assert cf.fitting_sentences(str(path)) == ["He ran.", "She sat."]


def test_wikitext2_valid_yields_hundreds_of_gender_sentences():
    sentences = cf.fitting_sentences()
    out = data.counterfactual_sentences(sentences, GENDER, corpus="WikiText-2 valid")
    # count independently: sentences whose stripped lower-case tokens hit words of exactly one class
    classes = [set(GENDER.words(c)) for c in range(2)]
    expected = []
    for s in sentences:
        tokens = {t.strip(".,;:!?\"()[]'").lower() for t in s.split()}
        tokens |= {t[:-2] for t in tokens if t.endswith("'s")}
        hits = [bool(tokens & words) for words in classes]
        if sum(hits) == 1:
            expected.append((s, hits.index(True)))
    assert len(out) == len(expected) >= 300
    assert list(zip(out.originals, out.labels.tolist())) == expected
    assert np.bincount(out.labels, minlength=2).min() >= 100  # both classes are represented
    for row, label in zip(out.tuples, out.labels):
        other = row[1 - label]
        assert other != row[label] and len(other.split()) == len(row[label].split())
