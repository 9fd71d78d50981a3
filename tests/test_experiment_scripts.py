"""``experiments/*/run.sh`` run the project's venv Python (not whatever ``python`` is on the PATH): ``$PYTHON``
if set, else ``<repo>/.venv/bin/python``, else ``python3``. Each script is copied into a scratch repo whose
interpreters are stubs that log their arguments, so nothing is computed."""

import os
import shutil
import stat
import subprocess
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


def run_script(tmp_path: Path, script: Path, *, venv: bool, python: Path | None = None,
               extra: tuple[str, ...] = ()) -> list[str]:
    """Run a copy of ``script`` in a scratch repo under ``tmp_path``; the interpreter calls it made."""
    repo = tmp_path / "repo"
    (repo / script).parent.mkdir(parents=True)
    shutil.copy(REPO / script, repo / script)
    if venv:
        stub(repo / ".venv" / "bin" / "python")
    bin_dir = tmp_path / "bin"  # python3 on the PATH; no `python` there
    stub(bin_dir / "python3")
    log = tmp_path / "calls.log"
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", "STUB_LOG": str(log), "HOME": str(tmp_path)}
    if python is not None:
        env["PYTHON"] = str(python)
    proc = subprocess.run(["bash", str(repo / script), *ARGS.get(str(script), []), *extra], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines()


def interpreters(calls: list[str]) -> set[str]:
    return {call.split(" ", 1)[0] for call in calls}


def test_the_paper_experiments_are_all_covered():
    assert {p.parent.name for p in SCRIPTS} >= {"rpam", "set_cao2022", "unstereo_eval", "zca_weat"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_run_script_uses_the_repo_venv(tmp_path, script):
    calls = run_script(tmp_path, script, venv=True)
    assert interpreters(calls) == {str(tmp_path / "repo" / ".venv" / "bin" / "python")}
    assert any(" -m jaxassoc -m " in call for call in calls)  # the sweep itself ran through it


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.parent.name)
def test_run_script_honours_PYTHON_then_falls_back_to_python3(tmp_path, script):
    other = stub(tmp_path / "other" / "python")
    assert interpreters(run_script(tmp_path / "a", script, venv=True, python=other)) == {str(other)}
    assert interpreters(run_script(tmp_path / "b", script, venv=False)) == {str(tmp_path / "b" / "bin" / "python3")}


def test_set_cao2022_gives_set_options_to_the_set_jobs_only(tmp_path):
    """ilps and ilps_star do not read metric.set_* and refuse it: the script passes it to the set sweep alone."""
    calls = run_script(tmp_path, Path("experiments/set_cao2022/run.sh"), venv=True,
                       extra=("metric.set_transform=log1m", "stats.n_bootstrap=100"))
    sweeps = {call.split("metric=")[1].split()[0]: call for call in calls if " -m jaxassoc -m " in call}
    assert sorted(sweeps) == ["ilps", "ilps_star", "set"]
    assert "metric.set_transform=log1m" in sweeps["set"]
    assert all("metric.set_transform" not in sweeps[m] for m in ("ilps", "ilps_star"))
    assert all("stats.n_bootstrap=100" in call for call in sweeps.values())
