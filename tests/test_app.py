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
    assert "n_itemz" in proc.stderr and "ToyConfig" in proc.stderr


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
