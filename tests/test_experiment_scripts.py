"""``experiments/*/run.sh`` run the project's venv Python (not whatever ``python`` is on the PATH): ``$PYTHON``
if set, else ``<repo>/.venv/bin/python``, else ``python3``. Each script is copied into a scratch repo whose
interpreters are stubs that log their arguments, so nothing is computed."""

import os
import shutil
import stat
import subprocess
from csv import DictReader
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.relative_to(REPO) for p in REPO.glob("experiments/*/run.sh"))
ARGS = {"experiments/rpam/run.sh": ["smollm2-135m"]}  # its MODEL argument


def stub(path: Path) -> Path:
    """An executable that logs ``<its path> <args>`` to $STUB_LOG and succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "$0 $*" >> "$STUB_LOG"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run_script(
    tmp_path: Path,
    script: Path,
    *,
    venv: bool,
    python: Path | None = None,
    extra: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    files: tuple[str, ...] = (),
) -> list[str]:
    """Run a copy of ``script`` (and of the repo ``files`` it reads) in a scratch repo under ``tmp_path``
    with ``env`` added; the interpreter calls it made."""
    repo = tmp_path / "repo"
    for path in (str(script), *files):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, repo / path)
    if venv:
        stub(repo / ".venv" / "bin" / "python")
    bin_dir = tmp_path / "bin"  # python3 on the PATH; no `python` there
    stub(bin_dir / "python3")
    log = tmp_path / "calls.log"
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "STUB_LOG": str(log),
        "HOME": str(tmp_path),
        **(env or {}),
    }
    if python is not None:
        env["PYTHON"] = str(python)
    proc = subprocess.run(
        ["bash", str(repo / script), *ARGS.get(str(script), []), *extra],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines()


def interpreters(calls: list[str]) -> set[str]:
    return {call.split(" ", 1)[0] for call in calls}


def test_the_paper_experiments_are_all_covered():
    assert {p.parent.name for p in SCRIPTS} >= {"rpam", "set_cao2022", "unstereo_eval", "zca_weat"}


@pytest.mark.process  # the shell script, with stub interpreters
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_run_script_uses_the_repo_venv(tmp_path, script):
    calls = run_script(tmp_path, script, venv=True)
    assert interpreters(calls) == {str(tmp_path / "repo" / ".venv" / "bin" / "python")}
    assert any(" -m jaxassoc -m " in call for call in calls)  # the sweep itself ran through it


@pytest.mark.process
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_run_script_honours_PYTHON_then_falls_back_to_python3(tmp_path, script):
    other = stub(tmp_path / "other" / "python")
    assert interpreters(run_script(tmp_path / "a", script, venv=True, python=other)) == {str(other)}
    assert interpreters(run_script(tmp_path / "b", script, venv=False)) == {str(tmp_path / "b" / "bin" / "python3")}


@pytest.mark.process
def test_set_cao2022_gives_set_options_to_the_set_jobs_only(tmp_path):
    """ilps and ilps_star do not read metric.set_* and refuse it: the script passes it to the set sweep alone."""
    calls = run_script(
        tmp_path,
        Path("experiments/set_cao2022/run.sh"),
        venv=True,
        extra=("metric.set_transform=log1m", "stats.n_bootstrap=100"),
    )
    sweeps = {call.split("metric=")[1].split()[0]: call for call in calls if " -m jaxassoc -m " in call}
    assert sorted(sweeps) == ["ilps", "ilps_star", "set"]
    assert "metric.set_transform=log1m" in sweeps["set"]
    assert all("metric.set_transform" not in sweeps[m] for m in ("ilps", "ilps_star"))
    assert all("stats.n_bootstrap=100" in call for call in sweeps.values())


def sweep_models(calls: list[str]) -> list[list[str]]:
    """The ``model=a,b,...`` list of each sweep call, in order."""
    return [
        next(a for a in call.split() if a.startswith("model=")).removeprefix("model=").split(",")
        for call in calls
        if " -m jaxassoc -m " in call
    ]


@pytest.mark.process
def test_unstereo_eval_MODELS_paper_sweeps_the_28_configs_of_models_csv(tmp_path):
    """One multirun over the paper's 28 models: the config names of models.csv's runnable column, in order."""
    csv = "experiments/unstereo_eval/models.csv"
    calls = run_script(
        tmp_path,
        Path("experiments/unstereo_eval/run.sh"),
        venv=True,
        env={"MODELS": "paper"},
        files=(csv,),
        extra=("model.precision=mixed",),
    )
    rows = list(DictReader((REPO / csv).open()))
    expected = [r["runnable_in_jaxassoc"].removeprefix("yes (model=").removesuffix(")") for r in rows]
    assert sweep_models(calls) == [expected] and len(set(expected)) == 28
    assert all((REPO / "conf" / "model" / f"{name}.yaml").is_file() for name in expected)
    assert "model.precision=mixed" in calls[0].split()


@pytest.mark.process
def test_unstereo_eval_MODELS_paper_refuses_a_csv_without_runnable_rows(tmp_path):
    repo = tmp_path / "repo" / "experiments" / "unstereo_eval"
    repo.mkdir(parents=True)
    (repo / "models.csv").write_text("model,hub_id,architecture,runnable_in_jaxassoc,loads,note\n")
    shutil.copy(REPO / "experiments/unstereo_eval/run.sh", repo / "run.sh")
    proc = subprocess.run(
        ["bash", str(repo / "run.sh")],
        env={"PATH": "/usr/bin:/bin", "MODELS": "paper", "PYTHON": "/bin/true"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "no 'yes (model=...)' rows" in proc.stderr and "models.csv" in proc.stderr


@pytest.mark.process
@pytest.mark.parametrize(
    ("script", "paper"),
    [
        (
            "experiments/zca_weat/run.sh",
            [
                "glove-6b-100d",
                "word2vec-googlenews",
                "bert-base-cased",
                "roberta-base",
                "gpt2",
                "unsup-simcse-bert-base-uncased",
                "unsup-simcse-roberta-base",
            ],
        ),
        ("experiments/set_cao2022/run.sh", ["bert-large-cased", "roberta-large"]),
    ],
    ids=["zca_weat", "set_cao2022"],
)
def test_MODELS_paper_sweeps_the_papers_models(tmp_path, script, paper):
    """The seven models of the ZCA-WEAT paper, the two masked LMs of Cao et al. 2022; each has its config."""
    models = sweep_models(run_script(tmp_path, Path(script), venv=True, env={"MODELS": "paper"}))
    assert models and all(m == paper for m in models)
    assert all((REPO / "conf" / "model" / f"{name}.yaml").is_file() for name in paper)


@pytest.mark.process
def test_MODELS_passes_other_names_through(tmp_path):
    calls = run_script(
        tmp_path, Path("experiments/unstereo_eval/run.sh"), venv=True, env={"MODELS": "pythia-70m,qwen2.5-0.5b"}
    )
    assert sweep_models(calls) == [["pythia-70m", "qwen2.5-0.5b"]]
