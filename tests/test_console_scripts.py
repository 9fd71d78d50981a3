"""Each console script once as a real process, as a user starts it (the venv's ``bin/`` entry points): the
other tests run them in process through the ``cli`` fixture (tests/conftest.py)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from jaxassoc.array_cache import cached_arrays

pytestmark = pytest.mark.process  # each test starts its console script's interpreter

BIN = Path(sys.executable).parent  # the venv's bin/, where pip put the console scripts
SETS = {"X": ["doctor", "engineer"], "Y": ["nurse", "teacher"], "A": ["he", "man"], "B": ["she", "woman"]}


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / script), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def weat_job(tmp_path_factory):
    """``jaxassoc`` on the embedded GloVe: a WEAT job of inline word sets into ``runs/weat``."""
    cwd = tmp_path_factory.mktemp("console")
    proc = run(
        "jaxassoc",
        "metric=weat",
        "model=glove-6b-50d",
        "dataset=custom_weat",
        *(f"dataset.{s}=[{','.join(words)}]" for s, words in SETS.items()),
        "stats.n_permutations=100",
        "stats.n_bootstrap=40",
        "hydra.run.dir=runs/weat",
        "cache_dir=null",
        cwd=cwd,
    )
    return cwd, proc


def test_jaxassoc_runs_a_job_and_writes_its_results(weat_job):
    cwd, proc = weat_job
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == f"results: {cwd / 'runs' / 'weat'}", proc.stdout[-2000:]
    assert (
        proc.stdout.splitlines()[-2]
        == f"report: jaxassoc-report {cwd / 'runs' / 'weat'}  (its tables and figures as one page)"
    )
    table = pd.read_parquet(cwd / "runs" / "weat" / "aggregates.parquet")
    assert len(table) == 1 and np.isfinite(table["d_raw"]).all()
    assert (cwd / "runs" / "weat" / "results.json").is_file()


def test_jaxassoc_report_summarises_the_finished_job(weat_job):
    cwd, _ = weat_job
    proc = run("jaxassoc-report", "runs", cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "report: " in proc.stdout
    text = (cwd / "runs" / "report" / "report.md").read_text()
    assert "`metric=weat`" in text and len(pd.read_parquet(cwd / "runs" / "report" / "table.parquet")) == 1


def test_jaxassoc_cache_lists_a_cache_folder(tmp_path):
    cached_arrays(tmp_path / "cache", "demo", {"weights": "abc"}, lambda: {"x": np.arange(1000, dtype=np.float32)})
    proc = run("jaxassoc-cache", "--cache-dir", str(tmp_path / "cache"), "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == f"cache: {tmp_path / 'cache'}" and lines[-1].startswith("total: 1 entries, ")
    assert any(line.startswith("demo ") for line in lines[1:-1]), proc.stdout


@pytest.mark.parametrize(
    ("command", "status"),
    [
        (("jaxassoc", "--help"), {141}),
        (("jaxassoc-cache", "--cache-dir", ".", "list"), {141}),
        (("jaxassoc-report", "--help"), {0, 141}),  # argparse's help swallows the write's OSError itself
    ],
)
def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly(tmp_path, command, status):
    # `jaxassoc --help | head` with a reader that has gone before the first write: a BrokenPipeError
    # traceback until issue 38. The reader closes its end at once, so the output meets a closed pipe.
    script, *args = command
    proc = subprocess.Popen(
        [str(BIN / script), *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) in status and err == "", err


def test_version_prints_jaxassocs_version_not_hydras(tmp_path):
    from jaxassoc import __version__

    proc = run("jaxassoc", "--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"jaxassoc {__version__}\n", proc.stdout + proc.stderr
