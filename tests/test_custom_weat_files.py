"""A set of ``dataset=custom_weat`` may name a text file, one word or target a line (issue 17, point 2: RPAM
targets from a plain text file): the same results as the words listed inline, and errors that name the file."""

import pandas as pd
import pytest
import yaml
from app_helpers import run_metric, start_hydra

from jaxassoc.data.custom_weat import load_weat_file
from jaxassoc.errors import DataError

SCIENCE = ["The atom has a nucleus.", "Physics explains motion.", "Chemistry studies reactions."]
ARTS = ["The poem has a rhyme.", "Dance expresses feeling.", "Painting studies colour."]
A, B = ["he", "man", "father"], ["she", "woman", "mother"]


@pytest.fixture(scope="module")
def hydra_context():
    yield from start_hydra()


def _files(folder, x_text):
    (folder / "sub").mkdir()
    (folder / "sub" / "science.txt").write_text(x_text)
    (folder / "arts.txt").write_text("\n".join(ARTS) + "\n")
    by_file = folder / "sub" / "tests.yaml"
    by_file.write_text(yaml.safe_dump({"T1": {"X": "science.txt", "Y": "../arts.txt", "A": A, "B": B}}))
    return by_file


def test_a_set_read_from_a_text_file_one_target_a_line(tmp_path):
    path = _files(tmp_path, "  " + SCIENCE[0] + "  \n\n" + "\n".join(SCIENCE[1:]) + "\n")
    test = load_weat_file(path).tests[0]
    assert test.targets_x == tuple(SCIENCE) and test.targets_y == tuple(ARTS) and test.attributes_a == tuple(A)


@pytest.mark.parametrize(
    "x_text, where, message",
    [
        ("\n".join([*SCIENCE, SCIENCE[1]]), "science.txt, line 4", "'Physics explains motion.' is already on line 2"),
        ("\n\n", "science.txt: test 'T1', set X", "holds no word or target"),
        ("\n".join([*SCIENCE, "he"]), "tests.yaml, line", "'he'"),  # a target that is also an attribute
    ],
)
def test_bad_target_files_name_the_file_and_line(tmp_path, x_text, where, message):
    path = _files(tmp_path, x_text)
    with pytest.raises(DataError, match=message) as e:
        load_weat_file(path)
    assert where in str(e.value)


def test_a_missing_target_file_names_the_test_file_and_the_path(tmp_path):
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump({"T1": {"X": "nowhere.txt", "Y": ARTS, "A": A, "B": B}}))
    with pytest.raises(DataError, match=r"tests.yaml, line \d+: test 'T1', set X names the file 'nowhere.txt'"):
        load_weat_file(path)


def test_rpam_scores_sentence_targets_from_text_files_as_listed_inline(tmp_path, hydra_context, tiny_checkpoint):
    by_file = _files(tmp_path, "\n".join(SCIENCE))
    inline = tmp_path / "inline.yaml"
    inline.write_text(yaml.safe_dump({"T1": {"X": SCIENCE, "Y": ARTS, "A": A, "B": B}}))
    lm = tiny_checkpoint("gpt2", n_positions=256)
    base = [
        "metric=rpam",
        "template=tp2",
        f"model.source={lm}",
        "model.name=tiny",
        "stats.n_bootstrap=50",
        "dataset=custom_weat",
    ]
    own = run_metric([*base, f"dataset.path={by_file}"], tmp_path / "files")
    listed = run_metric([*base, f"dataset.path={inline}"], tmp_path / "inline")
    assert list(own.items["target"]) == SCIENCE + ARTS
    pd.testing.assert_frame_equal(own.aggregates, listed.aggregates)
    assert own.provenance["dataset_version"] == listed.provenance["dataset_version"]


def test_editing_a_txt_file_that_the_test_file_names_reruns_the_job(tmp_path, cli):
    (tmp_path / "x.txt").write_text("engineer\nprogrammer\nscientist\n")
    (tmp_path / "tests.yaml").write_text(
        yaml.safe_dump({"T1": {"X": "x.txt", "Y": ["nurse", "teacher", "librarian"], "A": A, "B": B}})
    )
    job = ["metric=weat", "model=glove-6b-50d", "dataset=custom_weat", "dataset.path=tests.yaml", "hydra.run.dir=run"]
    assert cli("jaxassoc", *job, "cache_dir=null", cwd=tmp_path).returncode == 0
    before = pd.read_parquet(tmp_path / "run" / "aggregates.parquet")["d_raw"].iloc[0]
    (tmp_path / "x.txt").write_text("poet\ndancer\npainter\n")  # the YAML itself is unchanged
    rerun = cli("jaxassoc", *job, "cache_dir=null", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "dataset version changed" in rerun.stdout + rerun.stderr
    assert pd.read_parquet(tmp_path / "run" / "aggregates.parquet")["d_raw"].iloc[0] != before
