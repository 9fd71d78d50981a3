"""The Hydra app end to end, with a user-defined metric loaded as a plugin (no edit of jaxassoc).

Runs the console scripts in process (the ``cli`` fixture): config validation, sweeps into per-job folders,
resume, the result store's provenance and determinism, and the sweep report.
"""

import json
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import use_plugins

from jaxassoc.app import store


@pytest.fixture
def jaxassoc(cli, monkeypatch):
    """``jaxassoc(cwd, *overrides)``: the CLI, in process, with the toy metric plugin of ``tests/plugins``
    (``JAXASSOC_PLUGINS=toy_metric``)."""
    env = use_plugins(monkeypatch, "toy_metric")
    return lambda cwd, *overrides: cli("jaxassoc", *overrides, cwd=cwd, env={**env, "HYDRA_FULL_ERROR": "0"})


def test_plugin_metric_sweep_resume_and_report(tmp_path, jaxassoc, cli):
    sweep = ["-m", "metric=toy", "model=glove-6b-50d", "seed=1,2", "metric.n_items=3,4", "hydra.sweep.dir=sweep"]
    first = jaxassoc(tmp_path, *sweep)
    assert first.returncode == 0, first.stderr
    assert f"report: jaxassoc-report {tmp_path / 'sweep'}  (writes its tables and figures" in first.stdout
    jobs = sorted(p.parent for p in (tmp_path / "sweep").rglob("results.json"))
    assert len(jobs) == 4
    rows = pd.read_parquet(jobs[0] / "items.parquet")
    record = json.loads((jobs[0] / "results.json").read_text())
    assert {"prov_model", "prov_config_hash", "prov_seed", "prov_packages", "prov_device", "prov_toy_version"} <= set(
        rows.columns
    )
    assert record["provenance"]["config"]["metric"]["n_items"] == len(rows)

    mtimes = {p: p.stat().st_mtime_ns for p in jobs}
    second = jaxassoc(tmp_path, *sweep)
    assert second.returncode == 0, second.stderr
    assert "skip toy" in second.stderr + second.stdout
    assert {p: p.stat().st_mtime_ns for p in jobs} == mtimes  # nothing rewritten: no duplicated rows

    report = cli("jaxassoc-report", tmp_path / "sweep")
    assert report.returncode == 0, report.stderr
    table = pd.read_parquet(tmp_path / "sweep" / "report" / "table.parquet")
    assert len(table) == 4 and sorted(table["n_items"]) == [3, 3, 4, 4]
    assert (tmp_path / "sweep" / "report" / "effect_sizes_toy.png").stat().st_size > 0
    text = (tmp_path / "sweep" / "report" / "report.md").read_text()
    assert "## toy (`metric=toy`)" in text and "varying: `metric.n_items`, `seed`" in text
    assert "| metric.n_items | seed | test | effect_size | n_items |" in text  # the varying settings lead
    assert "| toy |" in text


def test_same_command_twice_gives_identical_parquet(tmp_path, jaxassoc):
    outs = []
    for run in ("a", "b"):
        proc = jaxassoc(tmp_path, "metric=toy", "model=glove-6b-50d", f"hydra.run.dir={run}")
        assert proc.returncode == 0, proc.stderr
        outs.append(
            ((tmp_path / run / "items.parquet").read_bytes(), (tmp_path / run / "aggregates.parquet").read_bytes())
        )
    assert outs[0] == outs[1]


def test_unknown_config_key_fails_naming_it(tmp_path, jaxassoc):
    proc = jaxassoc(tmp_path, "metric=toy", "metric.n_itemz=3")
    assert proc.returncode != 0
    assert "metric.n_itemz is not an option of metric=toy; did you mean metric.n_items?" in proc.stderr
    assert "+metric" not in proc.stderr  # no Hydra hint to add the key, which jaxassoc would then refuse
    assert not (tmp_path / "outputs").exists()  # refused before Hydra made a folder


def test_metric_model_mismatch_fails_before_work(tmp_path, jaxassoc):
    proc = jaxassoc(tmp_path, "metric=toy", "model=minilm-l6")
    assert proc.returncode != 0
    assert "cannot score model 'minilm-l6' of kind 'encoder'" in proc.stderr


def test_atomic_write_leaves_old_file_when_writer_dies(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("old")

    def dies(path: Path) -> None:
        path.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.atomic_write(target, dies)
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_an_edited_plugin_is_rerun_not_reused_and_its_identity_is_in_every_row(tmp_path, cli, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    source = (Path(__file__).parent / "plugins" / "toy_metric.py").read_text()
    (folder / "toy_metric.py").write_text(source)
    job = ["metric=toy", "model=glove-6b-50d", "hydra.run.dir=run"]

    def run():
        env = use_plugins(monkeypatch, "toy_metric", folder=folder)
        proc = cli("jaxassoc", *job, cwd=tmp_path, env={**env, "HYDRA_FULL_ERROR": "0"})
        assert proc.returncode == 0, proc.stderr
        return proc, pd.read_parquet(tmp_path / "run" / "aggregates.parquet")

    _, first = run()
    assert first["prov_plugin_module"].iloc[0] == "toy_metric"
    assert first["prov_plugin_source_sha256"].iloc[0] and first["prov_jaxassoc_source_sha256"].iloc[0]
    again, _ = run()
    assert "skip toy" in again.stdout + again.stderr  # unchanged code: reused
    (folder / "toy_metric.py").write_text(source.replace("float(values.mean())", "-float(values.mean())"))
    edited, second = run()
    assert "skip toy" not in edited.stdout + edited.stderr
    assert "code changed: plugin module toy_metric" in edited.stdout + edited.stderr
    assert second["effect_size"].iloc[0] == -first["effect_size"].iloc[0]
    assert second["prov_plugin_source_sha256"].iloc[0] != first["prov_plugin_source_sha256"].iloc[0]


def test_a_plugin_that_reads_no_dataset_records_none_and_refuses_one(tmp_path, cli, monkeypatch):
    env = {**use_plugins(monkeypatch, "toy_metric", "dataless_metric"), "HYDRA_FULL_ERROR": "0"}
    proc = cli("jaxassoc", "metric=dataless", "model=glove-6b-50d", "hydra.run.dir=run", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "dataless on glove-6b-50d / no dataset" in proc.stdout + proc.stderr
    rows = pd.read_parquet(tmp_path / "run" / "aggregates.parquet")
    assert rows["prov_dataset"].isna().all()
    record = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "dataset" not in record["provenance"]["config"] and record["inputs"]["dataset_version"] is None
    refused = cli(
        "jaxassoc",
        "metric=dataless",
        "model=glove-6b-50d",
        "dataset=winobias",
        "hydra.run.dir=r2",
        cwd=tmp_path,
        env=env,
    )
    assert refused.returncode != 0
    assert "dataset=winobias has no effect with metric=dataless: it reads no dataset" in refused.stderr


def test_a_result_from_other_jaxassoc_code_is_recomputed_with_the_reason(tmp_path, jaxassoc):
    job = ["metric=toy", "model=glove-6b-50d", "hydra.run.dir=run"]
    assert jaxassoc(tmp_path, *job).returncode == 0
    record_path = tmp_path / "run" / "results.json"
    record = json.loads(record_path.read_text())
    record["inputs"]["code"]["jaxassoc"]["source_sha256"] = "0" * 16  # as if an edit of the source made it
    record_path.write_text(json.dumps(record))
    rerun = jaxassoc(tmp_path, *job)
    assert rerun.returncode == 0, rerun.stderr
    assert "code changed: jaxassoc's source (0000000000000000 ->" in rerun.stdout + rerun.stderr
    record["inputs"]["code"]["jaxassoc"]["version"] = "0.0.1"
    record_path.write_text(json.dumps(record))
    assert "code changed: jaxassoc 0.0.1 ->" in (lambda p: p.stdout + p.stderr)(jaxassoc(tmp_path, *job))


def test_a_result_computed_under_other_jax_jaxlib_or_numpy_versions_is_recomputed(tmp_path, jaxassoc):
    job = ["metric=toy", "model=glove-6b-50d", "hydra.run.dir=run"]
    assert jaxassoc(tmp_path, *job).returncode == 0
    record_path = tmp_path / "run" / "results.json"
    record = json.loads(record_path.read_text())
    assert set(record["inputs"]["libraries"]) == {"jax", "jaxlib", "numpy"}
    for name in ("jaxlib", "numpy"):
        record["inputs"]["libraries"][name] = "0.0.0"  # as if written before an upgrade
    record_path.write_text(json.dumps(record))
    rerun = jaxassoc(tmp_path, *job)
    assert rerun.returncode == 0, rerun.stderr
    assert "libraries changed: jaxlib 0.0.0 -> " in rerun.stdout + rerun.stderr
    assert "numpy 0.0.0 -> " in rerun.stdout + rerun.stderr
    assert "skip toy" in (lambda p: p.stdout + p.stderr)(jaxassoc(tmp_path, *job))  # now reused


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("+sede=5", "sede is not an option of jaxassoc: it would be ignored"),
        ("+mesh.tpp=4", "mesh.tpp is not an option"),
        ("+audit.bogus=1", "+audit.bogus=1 has no effect with metric=toy: the audit options configure metric=audit"),
    ],
)
def test_a_plus_key_that_nothing_reads_is_refused_by_name(tmp_path, jaxassoc, override, named):
    proc = jaxassoc(tmp_path, "metric=toy", "model=glove-6b-50d", override, "hydra.run.dir=run")
    assert proc.returncode != 0 and named in proc.stderr
    assert not (tmp_path / "run" / "results.json").exists()


def test_items_csv_leaves_provenance_to_the_parquet_and_results_json(tmp_path, jaxassoc):
    assert (
        jaxassoc(tmp_path, "metric=toy", "model=glove-6b-50d", "metric.n_items=50", "hydra.run.dir=run").returncode == 0
    )
    items_csv = pd.read_csv(tmp_path / "run" / "items.csv")
    items = pd.read_parquet(tmp_path / "run" / "items.parquet")
    assert list(items_csv.columns) == ["item", "score"] and len(items_csv) == 50
    assert {"prov_config_hash", "prov_packages", "prov_jaxassoc_source_sha256"} <= set(items.columns)
    assert "prov_config_hash" in pd.read_csv(tmp_path / "run" / "aggregates.csv").columns


def test_the_report_leaves_out_damaged_and_failed_jobs_and_says_which(tmp_path, jaxassoc, cli):
    assert (
        jaxassoc(tmp_path, "-m", "metric=toy", "model=glove-6b-50d", "seed=1,2,3", "hydra.sweep.dir=sweep").returncode
        == 0
    )
    jobs = sorted(p.parent for p in (tmp_path / "sweep").rglob("results.json"))
    (jobs[0] / "aggregates.parquet").write_bytes(b"PAR1 truncated")
    (jobs[1] / "results.json").unlink()  # as a job that failed leaves its folder
    (tmp_path / "sweep" / ".hydra").mkdir()  # as the default audit's own run folder holds its parts
    (tmp_path / "sweep" / ".hydra" / "config.yaml").write_text("metric:\n  name: audit\n")
    report = cli("jaxassoc-report", tmp_path / "sweep")
    assert report.returncode == 0, report.stderr
    assert "2 job(s) left out" in report.stdout
    text = (tmp_path / "sweep" / "report" / "report.md").read_text()
    assert "## Jobs left out" in text and f"`{jobs[0].name}`: its results cannot be read (" in text
    assert f"`{jobs[1].name}`: no results.json: the job failed or has not finished" in text
    assert "`.`" not in text  # the audit's own folder is no job left out
    assert len(pd.read_parquet(tmp_path / "sweep" / "report" / "table.parquet")) == 1


def test_a_model_config_without_a_source_is_one_line_naming_the_key(tmp_path, jaxassoc):
    proc = jaxassoc(tmp_path, "metric=toy", "model=glove-6b-50d", "model.source=???", "hydra.run.dir=run")
    assert proc.returncode != 0
    assert "jaxassoc: error: model.source has no value; set it on the command line (model.source=...)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_output_folder_that_cannot_be_written_is_one_line_naming_it(tmp_path, jaxassoc, monkeypatch):
    import errno
    import os

    (tmp_path / "afile").write_text("")
    job = ["metric=toy", "model=glove-6b-50d"]
    empty = jaxassoc(tmp_path, *job, "hydra.run.dir=")  # it wrote the results into the working folder
    assert empty.returncode != 0 and "hydra.run.dir= is empty: name the output folder" in empty.stderr
    under_a_file = jaxassoc(tmp_path, *job, "hydra.run.dir=afile/run")
    assert under_a_file.returncode != 0 and "Traceback" not in under_a_file.stderr
    assert (
        "jaxassoc: error: the output folder afile/run cannot be made: afile is a file, not a folder; choose another "
        "with hydra.run.dir=..." in under_a_file.stderr
    )
    (tmp_path / "locked").mkdir()
    writable = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p).name != "locked" and writable(p, mode))  # root reads all
    read_only = jaxassoc(tmp_path, "-m", *job, "hydra.sweep.dir=locked/sweep")
    assert "the output folder locked/sweep cannot be written: locked is read-only for this user" in read_only.stderr
    monkeypatch.setattr(os, "access", writable)

    for code, reason, said, advice in (
        (errno.ENOSPC, "No space left on device", "cannot write", "free space"),  # the disk fills up
        (errno.EACCES, "Permission denied", "cannot access", "check its"),  # a forbidden file: not a full disk
    ):

        def failing(folder, *args, code=code, reason=reason, **kwargs):
            raise OSError(code, reason, str(Path(folder) / "items.parquet"))

        monkeypatch.setattr(store, "write_results", failing)
        failed = jaxassoc(tmp_path, *job, "hydra.run.dir=run")
        assert failed.returncode != 0 and "Traceback" not in failed.stderr
        assert f"jaxassoc: error: {said} {tmp_path / 'run' / 'items.parquet'}: {reason}; {advice}" in failed.stderr


def test_ctrl_c_ends_with_one_line_saying_how_to_resume(tmp_path, jaxassoc, monkeypatch):
    from jaxassoc.app import main

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(main, "run_job", interrupted)
    single = jaxassoc(tmp_path, "metric=toy", "model=glove-6b-50d", "hydra.run.dir=run")
    assert single.returncode == 130 and "Traceback" not in single.stderr
    assert single.stderr.strip().splitlines()[-1] == (
        f"jaxassoc: interrupted; rerun the same command with hydra.run.dir={tmp_path / 'run'} to resume "
        "(finished work is reused from the cache)"
    )
    sweep = jaxassoc(tmp_path, "-m", "metric=toy", "model=glove-6b-50d", "seed=1,2", "hydra.sweep.dir=sweep")
    assert sweep.returncode == 130 and "Traceback" not in sweep.stderr
    assert sweep.stderr.strip().splitlines()[-1] == (
        "jaxassoc: interrupted; rerun the same command with hydra.sweep.dir=sweep to resume (finished jobs are skipped)"
    )


def test_ctrl_c_in_any_console_script_is_one_line(tmp_path, cli, monkeypatch):
    from jaxassoc.app import report

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "write_report", interrupted)
    (tmp_path / "sweep").mkdir()
    proc = cli("jaxassoc-report", tmp_path / "sweep")
    assert proc.returncode == 130 and proc.stderr.strip() == "jaxassoc-report: interrupted"


def test_a_model_given_by_its_source_alone_is_named_after_it():
    from jaxassoc.app.cli import name_of_source

    assert name_of_source(["model.source=/data/llama-3-8b/"], "/data/llama-3-8b/") == "llama-3-8b"
    assert name_of_source(["model.source=EleutherAI/pythia-70m"], "EleutherAI/pythia-70m") == "pythia-70m"
    assert name_of_source(["model.source=m/q4.GGUF"], "m/q4.GGUF") == "q4"
    assert name_of_source(["model.source=."], ".") == Path.cwd().name  # the folder itself, not "."
    assert name_of_source(["model=gpt2", "model.source=/copy"], "/copy") is None  # model= names it
    assert name_of_source(["model.source=/copy", "model.name=mine"], "/copy") is None
