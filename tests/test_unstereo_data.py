"""UnStereoEval data: vendored files unmodified, row counts, natural filter, template filling, MaxPMI."""

import gzip
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from jaxassoc.data import unstereo as u
from jaxassoc.data._files import FILES_ROOT
from jaxassoc.errors import DataError, InputError

DATA = FILES_ROOT / "unstereo_eval"
FIXTURES = Path(__file__).parent / "fixtures" / "unstereo_eval" / "results"
SCORE_FILES = {
    "USE-5": ["5words/revised_templates"],
    "USE-10": ["10words/revised_templates"],
    "USE-20": ["20words/revised_templates"],
    "Winobias": ["Winobias/coref__Winobias__templates.dev", "Winobias/coref__Winobias__templates.test"],
    "Winogender": ["Winogender/coref__Winogender__templates"],
}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_vendored_files_match_their_recorded_hashes():
    listed = re.findall(r"^([0-9a-f]{64})  \./(\S+)$", (DATA / "SOURCE.md").read_text(), flags=re.M)
    on_disk = sorted(p.relative_to(DATA).as_posix() for p in DATA.rglob("*") if p.is_file() and p.name != "SOURCE.md")
    assert sorted(path for _, path in listed) == on_disk
    for digest, path in listed:
        assert _sha256((DATA / path).read_bytes()) == digest, path
    assert (DATA / "COMMIT").read_text().strip() == "2aaff91621516d3e03d65db0c0ccedf0b856f623"


def test_gzipped_fixtures_decompress_to_the_original_bytes():
    lines = (FIXTURES / "SHA256SUMS_uncompressed").read_text().splitlines()
    sums = {path: digest for digest, path in (line.split("  ") for line in lines)}
    assert len(sums) == 6
    for path, digest in sums.items():
        assert _sha256(gzip.decompress((FIXTURES / f"{path}.gz").read_bytes())) == digest, path


@pytest.mark.parametrize("name", u.DATASETS)
def test_row_counts_after_the_natural_filter(name):
    df = u.load_dataset(name)
    assert len(df) == u.EXPECTED_ROWS[name]
    assert df["max_gender_pmi"].notna().all() and not df["max_gender_pmi_invalid"].any()
    processed = json.loads((FIXTURES / "processed-results" / f"{name}.json").read_text())
    assert processed["unconstrained"]["num_examples"] == len(df)


def test_loaders_by_name_and_split():
    assert len(u.load_use(5)) == 4405 and len(u.load_use(10)) == 4740 and len(u.load_use(20)) == 4839
    dev, test, both = u.load_winobias("dev"), u.load_winobias("test"), u.load_winobias("all")
    assert (len(dev), len(test)) == (792, 794)
    pd.testing.assert_frame_equal(both, pd.concat([dev, test], ignore_index=True))
    assert len(u.load_winogender()) == 240
    with pytest.raises(DataError, match="USE-7|n=7"):
        u.load_use(7)
    with pytest.raises(DataError, match="'train'"):
        u.load_winobias("train")
    with pytest.raises(DataError, match="'USE-3'"):
        u.load_raw("USE-3")
    with pytest.raises(DataError, match="'WinoBias'"):
        u.load_dataset("WinoBias")


@pytest.mark.parametrize("n", [5, 10, 20])
def test_preprocessed_use_is_the_natural_raw_rows(n):
    raw = u.load_raw(f"USE-{n}")
    natural = u.natural_rows(raw)
    pre = u.load_use(n)
    assert pre["orig_index"].tolist() == list(range(len(pre)))
    for column in ("word", "target_word", "sentence", "template", "is_revised"):
        assert natural[column].tolist() == pre[column].tolist()
    # The stored flag, not likely_under, defines the filter: USE-5 row 914 differs (see module docstring).
    both_likely = raw["likely_under"] == "{'male': 'likely', 'female': 'likely'}"
    mismatch = raw.index[both_likely.to_numpy() != raw["is_natural"]].tolist()
    assert mismatch == ([914] if n == 5 else [])


def test_pmi_table_reads_words_verbatim():
    table = u.load_pmi_table()
    assert list(table.columns) == ["word", "pmi_diff", "counts", "freq"]
    assert len(table) == 65914 and table["word"].is_unique and table["pmi_diff"].notna().all()
    delta = dict(zip(table["word"], table["pmi_diff"]))
    # the file's float64 values against their 8-digit literals: ≤ 5e-9 / 0.6 relative, within approx's 1e-6
    assert delta["nan"] == pytest.approx(0.71483174) and delta["null"] == pytest.approx(-0.60888248)
    assert delta["she"] == pytest.approx(1.12944299) and "the" not in delta


def test_infills_match_the_upstream_configs():
    placeholders = json.loads((DATA / "benchmark-creation-configs" / "placeholders.json").read_text())
    constants = json.loads((DATA / "extracted_from_code" / "gender_pairs_and_constants.json").read_text())
    for config in (placeholders["placeholder_to_gender"], constants["template_infills"]):
        assert {g: {k.strip("{}"): v for k, v in m.items()} for g, m in config.items()} == u.INFILLS


@pytest.mark.parametrize("name", u.DATASETS)
def test_template_filling_reproduces_the_original_sentences(name):
    files = [FIXTURES / f"{f}__scores__EleutherAI__pythia-70m.csv.gz" for f in SCORE_FILES[name]]
    scores = pd.concat([pd.read_csv(f) for f in files])
    male, female = u.fill_templates(scores["template"].tolist())
    assert male == scores["M_template"].tolist()
    assert female == scores["F_template"].tolist()


def test_fill_template_options_and_errors():
    t = '"The CEO thanked {pronoun2}; {pronoun} smiled at {pronoun1} own {pronoun2}self." '
    assert u.fill_template(t, "female") == "The ceo thanked her; she smiled at her own herself."
    assert u.fill_template(t, "male", parity_preprocessing=False) == (
        '"The CEO thanked him; he smiled at his own himself." '
    )
    with pytest.raises(InputError, match="row 7.*no pronoun placeholder"):
        u.fill_template("He smiled.", "male", row=7)
    with pytest.raises(InputError, match=r"row 'x'.*\['pronoun3'\]"):
        u.fill_template("{pronoun3} smiled.", "male", row="x")
    with pytest.raises(InputError, match="row 1"):
        u.fill_templates(["{pronoun} ran.", "nothing here"])


def test_pmi_words_tokeniser():
    assert u.pmi_words("{pronoun} couldn't find {pronoun2}self, so {pronoun}'ll go-ahead.") == [
        "could",
        "'nt",
        "find",
        "so",
        "'ll",
        "go",
        "ahead",
    ]
    assert u.pmi_words("'Her 10,000 cafés? Gonna") == ["her", "10,000", "cafés", "gon", "na"]


def test_recomputed_max_gender_pmi_against_the_shipped_values():
    table = u.load_pmi_table()
    exact, total, abs_errors = 0, 0, []
    for name in u.DATASETS:
        df = u.load_dataset(name)
        recomputed = u.recompute_max_gender_pmi(df["template"], table)
        shipped = df["max_gender_pmi"].to_numpy()
        # a float64 max over the same float64 table entries: equal bit for bit when the method is the same
        exact += int(np.isclose(recomputed, shipped, rtol=0, atol=1e-12).sum())
        total += len(df)
        abs_errors.append(np.abs(recomputed - shipped))
    # Measured: 15809 of 15810 exact; the one miss is USE-5 "... the en'tain'ment." (spaCy's tokens differ).
    assert total == 15810 and exact >= 15809
    assert np.concatenate(abs_errors).mean() < 2e-4


def test_recomputed_max_gender_pmi_signed_argmax_and_missing():
    table = pd.DataFrame({"word": ["calm", "rugby", "knit"], "pmi_diff": [0.1, -0.9, 0.9]})
    got = u.recompute_max_gender_pmi(["{pronoun} likes rugby, calm.", "Knit, rugby!", "{pronoun} ran."], table)
    assert got[0] == -0.9 and got[1] == 0.9  # ties: first word in the sentence
    assert np.isnan(got[2])
