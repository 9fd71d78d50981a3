"""A sweep runs in a folder of its own, goes on past a failed job and ends with a summary of the failures
(which job, why, where its log is) and exit status 1; jobs draw no progress bars into logs."""

import io
import json

import pytest
from app_helpers import use_plugins
from hydra import compose, initialize_config_dir

from jaxassoc.app import main, sweep_failures

TOY = "metric=toy,model=glove-6b-50d"


def toy(cli, monkeypatch, cwd, *overrides):
    env = use_plugins(monkeypatch, "toy_metric")
    return cli("jaxassoc", "-m", "metric=toy", "model=glove-6b-50d", *overrides, cwd=cwd, env=env)


@pytest.mark.slow  # a failing sweep: ~8 s (issue 38: the default suite's budget)
def test_a_sweep_goes_on_past_failed_jobs_and_ends_with_their_summary(cli, tmp_path, monkeypatch):
    # seed=-1 is a bad input (refused in the job); metric.n_items=-2 makes the toy metric crash inside JAX
    proc = toy(cli, monkeypatch, tmp_path, "seed=1,-1,2", "metric.n_items=3,-2", "hydra.sweep.dir=sweep")
    assert proc.returncode == 1
    finished = sorted(p.parent.name for p in (tmp_path / "sweep").rglob("results.json"))
    assert finished == [f"metric.n_items=3,{TOY},seed=1", f"metric.n_items=3,{TOY},seed=2"]
    failed = tmp_path / "sweep" / f"metric.n_items=3,{TOY},seed=-1"
    summary = proc.stderr[proc.stderr.index("jaxassoc: error: 4 of 6 job(s) of the sweep failed") :]
    assert f"  {TOY.replace(',', ' ')} seed=-1 metric.n_items=3\n    error: seed=-1 is out of range" in summary
    assert f"  {TOY.replace(',', ' ')} seed=1 metric.n_items=-2\n    error: " in summary
    assert "a fault, not a bad input" in summary
    assert f"    log:   sweep/{failed.name}/main.log" in summary
    assert "hydra.sweep.dir=sweep reruns the failed jobs only" in summary
    record = json.loads((failed / "error.json").read_text())
    assert record["error"].startswith("seed=-1 is out of range") and record["overrides"][-2:] == [
        "seed=-1",
        "metric.n_items=3",
    ]
    assert "seed=-1 is out of range" in (failed / "main.log").read_text()

    # the same sweep again: the finished jobs are skipped, the failed ones run again and are counted once
    again = toy(cli, monkeypatch, tmp_path, "seed=1,-1,2", "metric.n_items=3,-2", "hydra.sweep.dir=sweep")
    assert again.returncode == 1 and "4 of 6 job(s) of the sweep failed" in again.stderr
    assert "skip toy" in again.stdout + again.stderr

    # fixed: the records of the failed jobs of earlier sweeps are not counted, and the sweep ends with status 0
    fixed = toy(cli, monkeypatch, tmp_path, "seed=1,2", "metric.n_items=3", "hydra.sweep.dir=sweep")
    assert fixed.returncode == 0, fixed.stderr
    assert "failed" not in fixed.stderr


def test_each_sweep_gets_a_folder_of_its_own(cli, tmp_path, monkeypatch):
    with initialize_config_dir(config_dir=str(main.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", return_hydra_config=True)
    assert cfg.hydra.sweep._get_node("dir")._value() == "multirun/${now:%Y-%m-%d}/${now:%H-%M-%S}"
    proc = toy(cli, monkeypatch, tmp_path, "seed=1,2")
    assert proc.returncode == 0, proc.stderr
    jobs = sorted(tmp_path.glob("multirun/*/*/*/results.json"))  # multirun/<date>/<time>/<job>
    assert [p.parent.name for p in jobs] == [f"{TOY},seed=1", f"{TOY},seed=2"] and jobs[0].parent.parent == jobs[
        1
    ].parent.parent


def test_summary_lists_each_failed_job_with_its_error_and_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(sweep_failures.SWEEP_ID, "s1")
    job = tmp_path / "sweep" / "seed=1"
    (job).mkdir(parents=True)
    (job / "main.log").write_text("...")
    sweep_failures.record(job, ["seed=1"], "MLIRError: Invalid type:\nerror: unknown", job / "main.log")
    text = sweep_failures.summary(tmp_path / "sweep", [json.loads((job / "error.json").read_text())], 3)
    assert text.splitlines() == [
        "jaxassoc: error: 1 of 3 job(s) of the sweep failed; the others ran to the end:",
        "  seed=1",
        "    error: MLIRError: Invalid type: ...",
        "    log:   sweep/seed=1/main.log",
        "Rerunning the same command with hydra.sweep.dir=sweep reruns the failed jobs only (finished jobs are skipped).",
    ]


def test_jobs_draw_no_bars_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    """``Job.quiet`` turns the bars off (the batch loops' and the loaders'); the stage lines stay."""
    with initialize_config_dir(config_dir=str(main.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["metric=weat", "model=glove-6b-50d", "cache_dir=null"])

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert main._job_objects(cfg, tmp_path).quiet
    monkeypatch.setattr("sys.stderr", Terminal())
    assert not main._job_objects(cfg, tmp_path).quiet
