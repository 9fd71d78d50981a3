"""Resume reuses a finished job only while everything its result depends on is unchanged: the config, the
model's files (weights, tokenizer), the dataset version and other files the config names; and only while
every result file is still there and readable. Each refusal is logged with its reason."""

import hashlib
import json
import logging
import shutil

import pandas as pd
import pytest
from app_helpers import app_config

from jaxassoc import data
from jaxassoc.app import store
from jaxassoc.app.main import _file, job_inputs, job_provenance, make_job, run_job


@pytest.fixture(scope="module")
def compose():
    with app_config("toy_metric") as compose:
        yield compose


@pytest.fixture
def folder(tmp_path, tiny_checkpoint):
    return tiny_checkpoint("gpt2", into=tmp_path / "model")  # a private copy: tests rewrite its files


@pytest.fixture
def log(caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    return caplog


def toy_job(compose, folder, *overrides):
    return compose(
        "metric=toy", "model=gpt2", "model.name=tiny", f"model.source={folder}", "cache_dir=null", *overrides
    )


def mtimes(folder):
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_unchanged_job_is_skipped_without_rewriting(compose, folder, tmp_path, log):
    cfg, out = toy_job(compose, folder), tmp_path / "job"
    assert run_job(cfg, out) is not None
    before = mtimes(out)
    assert run_job(cfg, out) is None
    assert mtimes(out) == before
    assert "skip toy" in log.text and "not reusing" not in log.text


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ("model.safetensors", "weights changed: model.safetensors"),
        ("tokenizer.json", "tokenizer changed: tokenizer.json"),
    ],
)
def test_rewritten_model_file_reruns_the_job(compose, folder, tmp_path, log, changed, reason, tiny_checkpoint):
    cfg, out = toy_job(compose, folder), tmp_path / "job"
    run_job(cfg, out)
    other = tiny_checkpoint("gpt2", 1)
    shutil.copyfile(other / changed, folder / changed)  # same path, same config: only the file differs
    assert run_job(cfg, out) is not None
    assert reason in log.text
    log.clear()
    assert run_job(cfg, out) is None  # the new result is reused in turn


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda out: (out / "aggregates.parquet").unlink(), "aggregates.parquet missing"),
        (
            lambda out: (out / "items.parquet").write_bytes((out / "items.parquet").read_bytes()[:100]),
            "items.parquet has 100 bytes",
        ),
        (lambda out: (out / "aggregates.csv").write_text(""), "aggregates.csv has 0 bytes"),
        (lambda out: (out / "results.json").write_text('{"provenance": '), "results.json unreadable"),
    ],
    ids=["deleted", "truncated-parquet", "emptied-csv", "truncated-results"],
)
def test_missing_or_damaged_result_file_reruns_the_job(compose, folder, tmp_path, log, damage, reason):
    cfg, out = toy_job(compose, folder), tmp_path / "job"
    run_job(cfg, out)
    damage(out)
    assert run_job(cfg, out) is not None
    assert f"not reusing the previous result in {out}: {reason}" in log.text
    assert pd.read_parquet(out / "aggregates.parquet")["n_items"].tolist() == [5]


def test_changed_dataset_version_reruns_the_job(compose, folder, tmp_path, log, monkeypatch):
    cfg, out = toy_job(compose, folder), tmp_path / "job"
    run_job(cfg, out)
    info = data.DATASETS["weat_caliskan2017"]
    changed = type(info)(info.name, info.loader, info.description, ("weat/SOURCE.md",))  # other packaged files
    monkeypatch.setitem(data.DATASETS, info.name, changed)
    assert run_job(cfg, out) is not None
    assert "dataset version changed" in log.text


def test_changed_config_reruns_the_job(compose, folder, tmp_path, log):
    out = tmp_path / "job"
    run_job(toy_job(compose, folder), out)
    assert run_job(toy_job(compose, folder, "metric.n_items=4"), out) is not None
    assert "config changed" in log.text


def test_result_without_input_fingerprint_is_not_reused(compose, folder, tmp_path, log):
    cfg, out = toy_job(compose, folder), tmp_path / "job"
    run_job(cfg, out)
    record = json.loads((out / "results.json").read_text())
    del record["inputs"]  # as written by an older jaxassoc
    (out / "results.json").write_text(json.dumps(record))
    assert run_job(cfg, out) is not None
    assert "records no input fingerprint" in log.text


def test_file_named_in_the_config_is_part_of_the_fingerprint(compose, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the doctor helped the nurse\n")
    cfg = compose("metric=weat", "model=glove-6b-50d", f"metric.corpus={corpus}", "whitening=zca")
    job, out = make_job(cfg, tmp_path / "job"), tmp_path / "job"
    provenance = job_provenance(cfg)
    inputs = job_inputs(job, provenance)
    assert str(corpus) in inputs["input_files"]
    table = pd.DataFrame({"test": ["W1"], "d": [0.5]})
    store.write_results(out, table, table, {"config_hash": inputs["config_hash"]}, {}, inputs=inputs)
    assert store.reuse_blocker(out, inputs) is None
    corpus.write_text("the engineer fixed the computer\n")
    assert store.reuse_blocker(out, job_inputs(job, provenance)) == "input files changed: corpus.txt"


def test_config_text_that_cannot_be_a_file_name_is_no_input_file(tmp_path):
    assert _file("These words are associated: {target} and " * 20) is None  # longer than a file name may be
    assert _file("nul\0byte") is None and _file(str(tmp_path)) is None
    (tmp_path / "corpus.txt").write_text("a\n")
    assert _file(str(tmp_path / "corpus.txt")) == tmp_path / "corpus.txt"


@pytest.mark.slow
def test_rerun_after_overwriting_weights_records_the_new_weight_hash(compose, folder, tmp_path, tiny_checkpoint):
    cfg = compose(
        "metric=rpam",
        "template=tp1",
        "dataset=bellezza",
        "dataset.sample=4",
        "model=gpt2",
        "model.name=tiny",
        f"model.source={folder}",
        "cache_dir=null",
    )
    out = tmp_path / "job"

    def recorded_hash():
        return json.loads((out / "results.json").read_text())["provenance"]["model_weights_sha256"]

    run_job(cfg, out)
    first = recorded_hash()
    assert first == hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    other = tiny_checkpoint("gpt2", 1)
    shutil.copyfile(other / "model.safetensors", folder / "model.safetensors")
    assert run_job(cfg, out) is not None
    assert recorded_hash() == hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest() != first
