"""Packaged datasets: counts and values against the papers, SOURCE.md and independent parses of the files."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jaxassoc.data as data
from jaxassoc.data import _files
from jaxassoc.data.registry import LazyLoader
from jaxassoc.errors import DataError

ROOT = _files.FILES_ROOT


def _raw_lines(relative: str) -> list[str]:
    """An independent reader: bytes → UTF-8 → lines (LF or CRLF), as the files are documented."""
    return (ROOT / relative).read_bytes().decode("utf-8").replace("\r\n", "\n").rstrip("\n").split("\n")


# --- integrity: the vendored bytes are the ones SOURCE.md hashed --------------------------------------

SOURCE_SHA256 = {
    "crows_pairs/crows_pairs_anonymized.csv": "dfb36986ce0502abbaf7055b9176da3d08d48e07df1251991b5dfbcbceab9d0c",
    "bellezza/Bellezza_Lexicon.csv": "b581382d6593395315e479cc27cd631ae05f0977d108ee96f6122e0eb043fec9",
    "bellezza/Bellezza_Lexicon_VAST.csv": "730f4cf3909efbd6ba87d37fd9e1e9a1d7eb632497c8c27e24623a19ffaa84e0",
    "simlex999/SimLex-999.txt": "ca00ff8515a36cde32d13c2b83def23f5a167b67db93ebfcfb7dae039ba22c0b",
    "sst2/dev.tsv": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
    "stsb/dev.tsv": "fe7dc0632a5033562f3cadff991f6e8d9b9b6311861660e78c3c82eb7db67f59",
    "stsb/original/sts-test.tsv": "affe45928a66ee5a708531233c95b7dacbbdc57f974f002a3d32ea0180cf816a",
    "weat/wefe/WEAT.json": "1a4a448a1825b29c67a7ebb7733343084b015f5b8ed720b2d9e193840a3d49a1",
    "wikitext2/test.txt": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
    "wikitext2/valid.txt": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
    "wordsim353/combined.csv": "49ff6433ae68abe716fb66433fd870483e289a7a8c74531f59eca847d103fff3",
    "vig_mediation/professions.json": "32cc82c7761e7cfb14e37e06dc1aa9f758bc8441f79ca7288996d3fc7c24639a",
    "vig_mediation/professions_male_stereo.json": "1731c96f6783a839aeebc1f7e647f103aeff38a2b81de725813708fe847addd2",
    "vig_mediation/professions_female_stereo.json": "f0e4d577136a9b5df9c9100a642b19bc4375985e6e5ff66cb3a5198cd2af1383",
}


@pytest.mark.parametrize("relative", sorted(SOURCE_SHA256))
def test_vendored_file_matches_source_hash(relative):
    assert hashlib.sha256((ROOT / relative).read_bytes()).hexdigest() == SOURCE_SHA256[relative]


def test_every_folder_keeps_its_provenance_and_the_total_size_is_small():
    for folder in (
        "weat",
        "wordsim353",
        "simlex999",
        "bellezza",
        "sst2",
        "stsb",
        "wikitext2",
        "crows_pairs",
        "vig_mediation",
        "mitigation",
        "debiaswe",
    ):
        assert (ROOT / folder / "SOURCE.md").is_file(), folder
    assert (ROOT / "stsb" / "LICENSE.txt").is_file()
    assert (ROOT / "us_stereotypes" / "LICENSE").is_file() and (ROOT / "us_stereotypes" / "COMMIT").is_file()
    assert (ROOT / "vig_mediation" / "LICENSE").is_file()
    assert (ROOT / "debiaswe" / "LICENSE").is_file()
    assert (ROOT / "ceat" / "COMMIT").is_file() and (ROOT / "ceat" / "LICENSE_NOTE.txt").is_file()
    ours = [p for p in ROOT.rglob("*") if p.is_file() and "unstereo_eval" not in p.parts]
    assert sum(p.stat().st_size for p in ours) < 15 * 2**20


def test_data_licenses_lists_every_vendored_file():
    notice = (Path(__file__).resolve().parents[1] / "DATA_LICENSES.md").read_text(encoding="utf-8")
    ours = [p for p in ROOT.rglob("*") if p.is_file() and "unstereo_eval" not in p.parts]
    assert len(ours) == 60
    assert [p.relative_to(ROOT).as_posix() for p in ours if p.name not in notice] == []


# --- WEAT suites ----------------------------------------------------------------------------------------

# (|X|, |Y|, |A|, |B|) per test: Caliskan et al. 2017 and its supplement (16 names in W4-W5).
CALISKAN_SIZES = [
    (25, 25, 25, 25),
    (25, 25, 25, 25),
    (32, 32, 25, 25),
    (16, 16, 25, 25),
    (16, 16, 8, 8),
    (8, 8, 8, 8),
    (8, 8, 8, 8),
    (8, 8, 8, 8),
    (6, 6, 7, 7),
    (8, 8, 8, 8),
]
# RPAM App. B: C10 with the 25-word pleasant/unpleasant sets.
WEAT_WS_SIZES = CALISKAN_SIZES[:9] + [(8, 8, 25, 25)]


def _sizes(suite):
    return [tuple(map(len, (t.targets_x, t.targets_y, t.attributes_a, t.attributes_b))) for t in suite.tests]


def test_caliskan_suite_sizes_and_paper_words():
    suite = data.load_weat_suite("weat_caliskan2017")
    assert suite.ids == tuple(f"W{i}" for i in range(1, 11))
    assert _sizes(suite) == CALISKAN_SIZES
    assert "short-term" in suite.test("W9").attributes_a
    assert "Billy" in suite.test("W10").targets_x and "Bill" not in suite.test("W10").targets_x
    for removed in ("Jay", "Kristen", "Tremayne", "Latonya"):
        assert removed not in suite.test("W4").targets_x + suite.test("W4").targets_y
    assert {"bomb", "evil"} <= set(suite.test("W3").attributes_b)  # unpleasant_5b in W3-W4
    assert {"agony", "prison"} <= set(suite.test("W1").attributes_b)  # unpleasant_5a in W1-W2
    w6 = suite.test("W6")
    assert (w6.x_name, w6.y_name, w6.a_name, w6.b_name) == ("Male names", "Female names", "Career", "Family")
    assert w6.targets_x[0] == "John" and w6.attributes_b[-1] == "relatives"


def test_weat_ws_suite_follows_rpam_appendix_b():
    suite = data.load_weat_suite("weat_ws")
    assert suite.ids == tuple(f"C{i}" for i in range(1, 11))
    assert _sizes(suite) == WEAT_WS_SIZES
    c1 = suite.test("C1")
    for test_id in ("C3", "C4", "C10"):  # the 25 unpleasant words of C1 (agony, prison)
        assert suite.test(test_id).attributes_b == c1.attributes_b
    assert suite.test("C8").attributes_a == suite.test("C7").attributes_a
    assert suite.test("C8").attributes_b == suite.test("C7").attributes_b
    swapped = suite.test("C7").with_roles_swapped()  # RPAM's default roles for C7/C8
    assert swapped.targets_x[:2] == ("male", "man") and swapped.attributes_b[0] == "poetry"
    assert (swapped.x_name, swapped.a_name) == (
        "Male terms",
        "Math",
    ) and swapped.with_roles_swapped() == suite.test("C7")


def test_every_weat_set_has_distinct_words_and_targets_are_disjoint():
    for name in data.SUITE_NAMES:
        for t in data.load_weat_suite(name).tests:
            for words in (t.targets_x, t.targets_y, t.attributes_a, t.attributes_b):
                assert len(set(words)) == len(words), (name, t.id)
            assert not set(t.targets_x) & set(t.targets_y), (name, t.id)


def test_caliskan_suite_differs_from_wefe_file_exactly_where_source_md_says():
    wefe = json.loads((ROOT / "weat/wefe/WEAT.json").read_text(encoding="utf-8"))
    cal = data.load_weat_suite("weat_caliskan2017")
    expected_differences = {
        ("W4", "targets_x"): {"Jay", "Kristen"},
        ("W5", "targets_x"): {"Jay", "Kristen"},
        ("W4", "targets_y"): {"Tremayne", "Latonya"},
        ("W5", "targets_y"): {"Tremayne", "Latonya"},
        ("W9", "attributes_a"): {"short", "short-term"},
        ("W10", "targets_x"): {"Bill", "Billy"},
    }
    wefe_sets = {
        1: ("flowers", "insects", "pleasant_5", "unpleasant_5a"),
        2: ("instruments", "weapons", "pleasant_5", "unpleasant_5a"),
        3: ("european_american_names_5", "african_american_names_5", "pleasant_5", "unpleasant_5b"),
        4: ("european_american_names_7", "african_american_names_7", "pleasant_5", "unpleasant_5b"),
        5: ("european_american_names_7", "african_american_names_7", "pleasant_9", "unpleasant_9"),
        6: ("male_names", "female_names", "career", "family"),
        7: ("math", "arts", "male_terms", "female_terms"),
        8: ("science", "arts_2", "male_terms_2", "female_terms_2"),
        9: ("mental_disease", "physical_disease", "temporary", "permanent"),
        10: ("young_people_names", "old_people_names", "pleasant_9", "unpleasant_9"),
    }
    fields = ("targets_x", "targets_y", "attributes_a", "attributes_b")
    wefe_suite = data.load_weat_suite("weat_wefe")
    for number, names in wefe_sets.items():
        for field, set_name in zip(fields, names):
            ours = set(getattr(cal.test(f"W{number}"), field))
            assert ours ^ set(wefe[set_name]) == expected_differences.get((f"W{number}", field), set())
            assert getattr(wefe_suite.test(f"W{number}"), field) == tuple(wefe[set_name])


def test_weat_unknown_suite_and_test_raise_data_error_listing_names():
    with pytest.raises(DataError, match="weat_caliskan2017"):
        data.load_weat_suite("weat_2017")
    with pytest.raises(DataError, match=r"W11.*W1"):
        data.weat_test("weat_caliskan2017", "W11")
    assert data.weat_test("weat_ws", "C7").targets_x[0] == "math"


def test_valence_attributes_are_wefe_pleasant_5_and_unpleasant_5a():
    wefe = json.loads((ROOT / "weat/wefe/WEAT.json").read_text(encoding="utf-8"))
    pleasant, unpleasant = data.valence_attributes()
    assert len(pleasant) == len(unpleasant) == 25
    assert pleasant == tuple(wefe["pleasant_5"]) and unpleasant == tuple(wefe["unpleasant_5a"])


# --- word similarity and valence -----------------------------------------------------------------------


def test_wordsim353_counts_quirks_and_values_from_an_independent_parse():
    frame = data.load_wordsim353()
    assert list(frame.columns) == ["word1", "word2", "score"] and len(frame) == 353
    rows = list(csv.reader(_raw_lines("wordsim353/combined.csv")))[1:]
    assert [(r[0], r[1], float(r[2])) for r in rows] == list(frame.itertuples(index=False, name=None))
    pairs = list(zip(frame.word1, frame.word2))
    assert len(set(pairs)) == 352 and pairs.count(("money", "cash")) == 2
    assert frame.score[pairs.index(("tiger", "tiger"))] == 10.0
    assert frame.score[pairs.index(("bank", "money"))] == 8.12
    assert frame.score[pairs.index(("money", "bank"))] == 8.50
    assert len(data.load_wordsim353("set1")) == 153 and len(data.load_wordsim353("set2")) == 200
    set1 = data.load_wordsim353("set1")
    assert (set1.word1[0], set1.word2[0], set1.score[0]) == ("love", "sex", 6.77)
    with pytest.raises(DataError, match="combined"):
        data.load_wordsim353("set3")


def test_simlex999_counts_and_values():
    frame = data.load_simlex999()
    assert len(frame) == 999 and list(frame.columns[:4]) == ["word1", "word2", "pos", "score"]
    assert frame.pos.value_counts().to_dict() == {"N": 666, "V": 222, "A": 111}
    assert int(frame["SimAssoc333"].sum()) == 333
    header, *rows = [line.split("\t") for line in _raw_lines("simlex999/SimLex-999.txt")]
    assert header[3] == "SimLex999"
    assert [(r[0], r[1], float(r[3])) for r in rows] == list(zip(frame.word1, frame.word2, frame.score))
    smart = frame[(frame.word1 == "smart") & (frame.word2 == "intelligent")]
    assert smart.score.tolist() == [9.2]


def test_bellezza_canonical_file_and_vast_copy_agree():
    frame = data.load_bellezza()
    assert len(frame) == 399 and frame.word.is_unique and list(frame.columns[:2]) == ["word", "valence"]
    vast = list(csv.DictReader(_raw_lines("bellezza/Bellezza_Lexicon_VAST.csv")))
    assert [r["word"] for r in vast] == frame.word.tolist()
    assert [float(r["combined_pleasantness"]) for r in vast] == frame.valence.tolist()
    by_word = dict(zip(frame.word, frame.valence))
    assert by_word["love"] == 4.83 and by_word["rape"] == 1.22 and by_word["abuse"] == 1.53
    assert frame.valence.max() == 4.83 and frame.valence.min() == 1.22


# --- sentences ------------------------------------------------------------------------------------------


def test_sst2_validation_counts_and_first_rows():
    frame = data.load_sst2()
    assert len(frame) == 872 and frame.label.value_counts().to_dict() == {1: 444, 0: 428}
    assert frame.sentence[0] == "it 's a charming and often affecting journey . "
    assert (frame.sentence[1], frame.label[1]) == ("unflinchingly bleak and desperate ", 0)
    with pytest.raises(DataError, match="validation"):
        data.load_sst2("train")


def test_stsb_dev_and_test_parsed_without_quote_handling():
    dev, test = data.load_stsb("dev"), data.load_stsb("test")
    assert len(dev) == 1500 and len(test) == 1379
    assert dev.genre.value_counts().to_dict() == {"main-captions": 625, "main-news": 500, "main-forums": 375}
    assert test.genre.value_counts().to_dict() == {"main-captions": 625, "main-news": 500, "main-forums": 254}
    assert dev.iloc[0].tolist() == [
        "A man with a hard hat is dancing.",
        "A man wearing a hard hat is dancing.",
        5.0,
        "main-captions",
    ]
    assert test.iloc[2].tolist()[:3] == [
        "One woman is measuring another woman's ankle.",
        "A woman measures another woman's ankle.",
        5.0,
    ]
    raw = list(csv.reader(_raw_lines("stsb/original/sts-test.tsv"), delimiter="\t", quoting=csv.QUOTE_NONE))
    assert [(r[5], r[6], float(r[4])) for r in raw] == list(zip(test.sentence1, test.sentence2, test.score))
    assert sum('"' in s for s in test.sentence1) > 0  # the unbalanced quotes survive
    assert dev.score.min() >= 0.0 and dev.score.max() <= 5.0
    with pytest.raises(DataError, match="dev"):
        data.load_stsb("train")


# --- WikiText-2 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "split, lines, tokens, paragraphs", [("test", 4358, 245_569, 2185), ("valid", 3760, 217_646, 1841)]
)
def test_wikitext2_counts_and_heading_removal(split, lines, tokens, paragraphs):
    raw = _raw_lines(f"wikitext2/{split}.txt")
    assert len(raw) == lines
    assert sum(len(line.split()) + 1 for line in raw) == tokens  # the paper's count, one <eos> per line
    loaded = data.load_wikitext2(split)
    assert len(loaded) == paragraphs and all(p and p == p.strip() for p in loaded)

    def is_heading(text):
        return text.startswith("= ") and text.endswith(" =")

    headings = [line.strip() for line in raw if is_heading(line.strip())]
    assert len(loaded) + len(headings) == sum(bool(line.strip()) for line in raw)
    assert not any(is_heading(p) for p in loaded)
    if split == "test":  # 706 headings; two table rows start with "= " but are text, and stay
        assert len(headings) == 706 and "= National record" in loaded


def test_wikitext2_sentences_are_a_lossless_split():
    paragraphs = data.load_wikitext2("valid")
    sentences = data.wikitext2_sentences("valid")
    assert " ".join(sentences) == " ".join(paragraphs)
    ends = {".", "!", "?"}
    assert not any(ends & set(s.split()[:-1]) for s in sentences)  # cut after every end token ...
    assert sum(s.split()[-1] not in ends for s in sentences) <= len(paragraphs)  # ... and only there
    assert sentences[0].startswith("Homarus gammarus , known as the European lobster")
    no_unk = data.wikitext2_sentences("valid", drop_unk=True)
    assert 0 < len(no_unk) < len(sentences) and not any("<unk>" in s for s in no_unk)
    with pytest.raises(DataError, match="valid"):
        data.load_wikitext2("train")


def test_detokenize_wikitext():
    text = (
        'It cost $ 1 @,@ 000 ( about 3 @.@ 5 % ) , did n\'t it ? He said " In Safe Hands " ; '
        "a guest @-@ starring role ."
    )
    assert data.detokenize_wikitext(text) == (
        'It cost $1,000 (about 3.5%), didn\'t it? He said "In Safe Hands"; a guest-starring role.'
    )
    assert data.detokenize_wikitext('He said " no .') == 'He said " no.'  # unpaired quote left alone
    detok = data.wikitext2_sentences("test", detokenize=True)
    assert detok[0] == "Robert <unk> is an English film, television and theatre actor."


# --- U.S. stereotypes (ABC) and CEAT --------------------------------------------------------------------


def test_abc_traits_groups_priors_and_templates():
    abc = data.load_abc()
    assert len(abc.traits) == 32 and len(abc.trait_pairs) == 16
    assert abc.traits["powerless"] == ("powerless", "weak", "helpless", "incapable")
    assert abc.trait_pairs[0] == ("powerless", "powerful") and abc.trait_pairs[-1] == (
        "egotistic",
        "altruistic",
    )
    assert {p for pair in abc.trait_pairs for p in pair} == set(abc.traits)
    assert all(len(groups) == 51 for groups in abc.groups.values())
    assert abc.groups["<sgroup>"][14] == "Black person" and abc.groups["<cpgroup>"][14] == "Black people"
    assert abc.priors == {"<sgroup>": "person", "<pgroup>": "people", "<cpgroup>": "People"}
    assert len(abc.templates) == 8 and len(abc.all_templates) == 35
    assert [len(t) for t in abc.templates.values()] == [3, 5, 1, 3, 16, 5, 1, 1]
    assert abc.slot_of("That <sgroup> is <mask>.") == "<sgroup>"
    assert {abc.slot_of(t) for t in abc.all_templates} == set(abc.groups)
    assert abc.synonym_aggregation == "median"
    with pytest.raises(DataError, match="exactly one"):
        abc.slot_of("<pgroup> and <sgroup> are <mask>.")


def test_human_ratings_26_by_16_against_the_json_file():
    ratings = data.load_human_ratings()
    assert list(ratings.columns) == ["group", "trait_pair", "left", "right", "rating"]
    assert len(ratings) == 416 and ratings.group.nunique() == 26 and ratings.trait_pair.nunique() == 16
    raw = json.loads((ROOT / "us_stereotypes/dataset/Aggregated_scores.json").read_text(encoding="utf-8"))
    for row in ratings.itertuples():
        assert row.rating == float(raw[row.group][row.trait_pair])
    women = ratings[ratings.group == "women"].set_index("trait_pair").rating
    assert women["powerless - powerful"] == 50.6 and women["egoistic - altruistic"] == 57.1
    assert ratings.rating.between(0, 100).all()
    abc = data.load_abc()
    assert set(zip(ratings.left, ratings.right)) == set(abc.trait_pairs)
    assert set(abc.human_groups) == set(ratings.group)
    assert all(g in abc.groups["<sgroup>"] for g in abc.human_groups.values() if g != "person")


def test_ceat_wordlists():
    tests = data.load_ceat_wordlists()
    assert list(tests) == [f"C{i}" for i in range(1, 11)] + ["AF-inter", "AF-emerg", "LF-inter", "LF-emerg"]
    sizes = {k: tuple(map(len, (t.targets_x, t.targets_y, t.attributes_a, t.attributes_b))) for k, t in tests.items()}
    assert [sizes[f"C{i}"] for i in range(1, 11)] == CALISKAN_SIZES
    assert sizes["AF-inter"] == (12, 12, 13, 13) and sizes["LF-emerg"] == (12, 12, 6, 6)
    cal = data.load_weat_suite("weat_caliskan2017")
    for i in range(1, 11):
        for field in ("targets_x", "targets_y", "attributes_a", "attributes_b"):
            ours, theirs = set(getattr(tests[f"C{i}"], field)), set(getattr(cal.test(f"W{i}"), field))
            assert ours ^ theirs == ({"short", "short-term"} if (i, field) == (9, "attributes_a") else set())
    assert tests["LF-inter"].targets_x[0] == "Maria" and tests["AF-emerg"].attributes_a[0] == "bigbutt"


# --- registry and errors --------------------------------------------------------------------------------


def test_registry_loads_by_name_with_options_and_versions():
    assert len(data.load_dataset("stsb", split="test")) == 1379
    assert data.load_dataset("weat_ws").name == "weat_ws"
    assert len(data.load_dataset("bellezza")) == 399
    for name in ("use5", "use10", "use20", "winobias", "winogender"):
        assert name in data.DATASETS
    info = data.dataset_info("sst2")
    assert len(info.version) == 12 and info.version == data.DATASETS["sst2"].version
    assert data.dataset_info("stsb").version != info.version


def test_registry_unknown_name_and_bad_option_raise_data_error():
    with pytest.raises(DataError, match=r"unknown dataset 'ws353'.*'wordsim353'"):
        data.load_dataset("ws353")
    with pytest.raises(DataError, match="splt"):
        data.load_dataset("stsb", splt="test")


def test_version_changes_with_file_content(tmp_path, monkeypatch):
    original = _files.content_hash(("sst2/dev.tsv",))
    shutil.copytree(ROOT / "sst2", tmp_path / "sst2")
    monkeypatch.setattr(_files, "FILES_ROOT", tmp_path)
    assert _files.content_hash(("sst2/dev.tsv",)) == original and len(original) == 12
    with (tmp_path / "sst2/dev.tsv").open("a", encoding="utf-8") as handle:
        handle.write("x\t1\n")
    assert _files.content_hash(("sst2/dev.tsv",)) != original


def test_missing_file_raises_data_error_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_files, "FILES_ROOT", tmp_path)
    with pytest.raises(DataError, match=r"'sst2/dev\.tsv' is missing.*reinstall"):
        data.load_sst2()
    with pytest.raises(DataError, match=r"weat/weat_caliskan2017\.json"):
        data.load_dataset("weat_caliskan2017")
    with pytest.raises(DataError, match="reinstall"):
        _files.content_hash(("wikitext2/test.txt",))


def test_lazy_loader_reports_a_missing_module():
    with pytest.raises(DataError, match=r"jaxassoc\.data\._no_such_module.*reinstall"):
        LazyLoader("jaxassoc.data._no_such_module", "load")()


@pytest.mark.process  # what an import pulls in shows only in a fresh interpreter
def test_registry_does_not_import_unstereo_or_torch():
    code = "import sys, jaxassoc.data; print('jaxassoc.data.unstereo' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# --- malformed packaged files: a DataError naming the file and the column, row or line ----------------


def _malformed(tmp_path, monkeypatch, relative: str, edit) -> None:
    """Point the loaders at a copy of the packaged files where ``relative`` is ``edit(its bytes)``."""
    shutil.copytree(ROOT, tmp_path / "files")
    path = tmp_path / "files" / relative
    path.write_bytes(edit(path.read_bytes()))
    monkeypatch.setattr(_files, "FILES_ROOT", tmp_path / "files")


@pytest.mark.parametrize(
    "relative, edit, load, message",
    [
        (
            "wordsim353/combined.csv",
            lambda b: b.replace(b"Human (mean)", b"Human"),
            data.load_wordsim353,
            r"'wordsim353/combined\.csv' is malformed: it has no column \['Human \(mean\)'\]",
        ),
        (
            "wordsim353/combined.csv",
            lambda b: b.replace(b"tiger,cat,7.35", b"tiger,cat,7.3x"),
            data.load_wordsim353,
            r"'wordsim353/combined\.csv' is malformed: column 'Human \(mean\)', data row 2: the value '7\.3x' is not",
        ),
        (
            "simlex999/SimLex-999.txt",
            lambda b: b.replace(b"old\tnew\tA\t1.58", b"old\tnew\tA\t1.58\textra"),
            data.load_simlex999,
            r"'simlex999/SimLex-999\.txt' is malformed: its first data row has more fields",
        ),
        (
            "simlex999/SimLex-999.txt",
            lambda b: b.replace(b"smart\tintelligent\tA\t9.2", b"smart\tintelligent\tA\t9.2\t"),
            data.load_simlex999,
            r"'simlex999/SimLex-999\.txt' is malformed: Error tokenizing data.*line 3, saw 11",
        ),
        (
            "wordsim353/combined.csv",
            lambda b: b.replace(b"tiger,cat,7.35", b"tiger,cat"),
            data.load_wordsim353,
            r"'wordsim353/combined\.csv' is malformed: column 'Human \(mean\)', data row 2: the value '' is not a number",
        ),
        (
            "bellezza/Bellezza_Lexicon.csv",
            lambda b: b.replace(b"0,abuse,1.62", b"0,abuse,1.6.2"),
            data.load_bellezza,
            r"'bellezza/Bellezza_Lexicon\.csv' is malformed: column 'male_pleasantness', data row 1: the value '1\.6\.2'",
        ),
        (
            "sst2/dev.tsv",
            lambda b: b.replace(b"desperate \t0", b"desperate \tzero"),
            data.load_sst2,
            r"'sst2/dev\.tsv' is malformed: line 3 must be '<sentence><TAB><0 or 1>'",
        ),
        (
            "stsb/dev.tsv",
            lambda b: b.replace(b"dancing.\t5.000", b"dancing.\tfive"),
            data.load_stsb,
            r"'stsb/dev\.tsv' is malformed: line 2: the score 'five' is not a number",
        ),
        (
            "wikitext2/test.txt",
            lambda b: b.replace(b"Robert", "Röbert".encode("latin-1"), 1),
            data.load_wikitext2,
            r"packaged data file .*wikitext2/test\.txt, line 2, column 5: b'\\xf6' is not UTF-8.*reinstall",
        ),
        (
            "weat/weat_ws_rpam2026.json",
            lambda b: b[:-5],
            lambda: data.load_dataset("weat_ws"),
            r"'weat/weat_ws_rpam2026\.json' is malformed: not valid JSON at line \d+, column \d+",
        ),
        (
            "weat/weat_ws_rpam2026.json",
            lambda b: b.replace(b'"X"', b'"x"', 1),
            lambda: data.load_dataset("weat_ws"),
            r"'weat/weat_ws_rpam2026\.json' is malformed: the key 'X' is missing",
        ),
        (
            "weat/wefe/WEAT.json",
            lambda b: b.replace(b'"flowers"', b'"flower"', 1),
            lambda: data.load_dataset("weat_wefe"),
            r"'weat/wefe/WEAT\.json' is malformed: the key 'flowers' is missing",
        ),
        (
            "ceat/extracted_from_code/ceat_weat_wordlists.json",
            lambda b: b.replace(b'"tests"', b'"test"', 1),
            data.load_ceat_wordlists,
            r"ceat_weat_wordlists\.json' is malformed: the key 'tests' is missing",
        ),
        (
            "us_stereotypes/extracted_from_code/abc_traits_groups_templates.json",
            lambda b: b.replace(b'"groups_plur"', b'"groups_plural"', 1),
            data.load_abc,
            r"abc_traits_groups_templates\.json' is malformed: the key 'groups_plur' is missing",
        ),
        (
            "unstereo_eval/data/pmi_file_w_counts.csv",
            lambda b: b.replace(b"-4.74582214318505", b"n/a", 1),
            lambda: __import__("jaxassoc.data.unstereo").data.unstereo.load_pmi_table(),
            r"pmi_file_w_counts\.csv' is malformed: column 'pmi_diff', data row 1: the value 'n/a' is not a number",
        ),
        (
            "unstereo_eval/data/datasets/preprocessed/Winogender-no-maxpmi-constraint.csv.gz",
            lambda b: b[: len(b) // 2],
            lambda: data.load_dataset("winogender"),
            r"Winogender-no-maxpmi-constraint\.csv\.gz' is malformed",
        ),
    ],
)
def test_malformed_packaged_file_is_a_data_error_naming_it(tmp_path, monkeypatch, relative, edit, load, message):
    _malformed(tmp_path, monkeypatch, relative, edit)
    with pytest.raises(DataError, match=message):
        load()


def test_user_text_corpus_is_utf8_with_its_bom_dropped_or_refused_by_line(tmp_path):
    from jaxassoc.app.tasks.weat import _corpus_sentences

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes("\ufeffThe nurse said hello.\n\n  A café opened.  \n".encode())
    assert (
        _corpus_sentences(str(corpus)) == data.load_text_corpus(corpus) == ["The nurse said hello.", "A café opened."]
    )
    corpus.write_bytes("The nurse said hello.\nA café opened.\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"corpus file .*corpus\.txt, line 2, column 6: b'\\xe9' is not UTF-8"):
        _corpus_sentences(str(corpus))
    corpus.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match=r"corpus\.txt holds no text"):
        _corpus_sentences(str(corpus))
