"""RPAM forward results through the on-disk cache: a hit is bit-identical to a recomputation, runs no
forward pass, and serves the no-normalisation ablation, other statistics options and the downstream task;
another template or attribute set misses."""

import logging

import numpy as np
import pandas as pd
import pytest

from jaxassoc.app import model_loading
from jaxassoc.app.config import DatasetConfig, ModelConfig, StatsConfig, TemplateConfig, WhiteningConfig
from jaxassoc.app.spec import Job
from jaxassoc.app.tasks import rpam as rpam_job
from jaxassoc.models import load_model
from jaxassoc.readouts import rpam as pipeline
from jaxassoc.readouts import rpam_prompts
from jaxassoc.readouts.rpam_prompts import PromptTemplate
from jaxassoc.suites import rpam as rpam_suite

TP1 = PromptTemplate("tp1", "These words are associated: {target} and")
TP2 = PromptTemplate("tp2", "This sentence and this word are associated: {quote}This is {target}{quote} and {quote}")
TARGETS = ["doctor", "nurse", "a test of words", "music"]
ATTRIBUTES = ["he", "music", "math", "a", "xylophone", "his", "word"]


@pytest.fixture(scope="module")
def folder(tiny_checkpoint):
    return tiny_checkpoint("gpt2", n_positions=512)  # the rating prompt


@pytest.fixture(scope="module")
def model(folder):
    return load_model(folder)


@pytest.fixture
def counted(monkeypatch):
    """Counts the calls of rpam_inputs (the forward passes) behind the cache."""
    calls = []
    real = rpam_prompts.rpam_inputs

    def wrapper(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(rpam_prompts, "rpam_inputs", wrapper)
    return calls


def _assert_same_inputs(a, b):
    for field in ("first_logits", "continuation", "log_partition"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)
    assert (a.n_multi_token, a.n_sequences, a.n_continuations) == (b.n_multi_token, b.n_sequences, b.n_continuations)


def test_hit_is_bit_identical_and_runs_no_forward_pass(model, tmp_path, counted):
    p, inputs = pipeline.probabilities(model, TARGETS, ATTRIBUTES, TP1, cache_dir=tmp_path, batch_size=4)
    assert len(counted) == 1 and inputs.n_multi_token > 0  # the continuation passes are cached too
    p_hit, hit = pipeline.probabilities(model, TARGETS, ATTRIBUTES, TP1, cache_dir=tmp_path, batch_size=4)
    assert len(counted) == 1
    _assert_same_inputs(hit, inputs)
    assert p_hit.dtype == p.dtype and np.array_equal(p_hit, p)
    # the ablation reads the same passes
    p_ablation, _ = pipeline.probabilities(
        model, TARGETS, ATTRIBUTES, TP1, normalise=False, cache_dir=tmp_path, batch_size=4
    )
    assert len(counted) == 1 and not np.array_equal(p_ablation, p)
    # a recomputation without the cache gives the very same bits
    p_fresh, fresh = pipeline.probabilities(model, TARGETS, ATTRIBUTES, TP1, batch_size=4)
    assert len(counted) == 2
    _assert_same_inputs(fresh, inputs)
    assert np.array_equal(p_fresh, p)


@pytest.mark.parametrize("change", ["template", "attributes", "targets", "bos"])
def test_changed_key_input_misses(model, tmp_path, counted, change):
    pipeline.probabilities(model, TARGETS, ATTRIBUTES, TP1, cache_dir=tmp_path, batch_size=4)
    template, attributes, targets, options = TP1, ATTRIBUTES, TARGETS, {}
    if change == "template":
        template = TP2
    elif change == "attributes":
        attributes = ATTRIBUTES[:-1]
    elif change == "targets":
        targets = TARGETS[:-1] + ["art"]
    else:
        options = {"add_bos": True}
    pipeline.probabilities(model, targets, attributes, template, cache_dir=tmp_path, batch_size=4, **options)
    assert len(counted) == 2


def _job(folder, tmp_path, dataset, sample=None, **metric):
    return Job(
        model=ModelConfig(name="tiny", source=str(folder), batch_size=8),
        metric=rpam_job.RpamMetricConfig(name="rpam", **metric),
        dataset=DatasetConfig(name=dataset, sample=sample),
        template=TemplateConfig(name="tp1", text=TP1.text),
        whitening=WhiteningConfig(),
        stats=StatsConfig(n_permutations=200, n_bootstrap=100),
        seed=0,
        output_dir=tmp_path / "out",
        quiet=True,
        cache_dir=tmp_path / "cache",
    )


@pytest.mark.slow  # ~6 s (issue 38: the default suite's budget)
def test_job_reruns_ablation_and_downstream_hit_the_cache(folder, tmp_path, counted, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    first = rpam_job.run(_job(folder, tmp_path, "bellezza", sample=12))
    assert len(counted) == 1
    assert any(r.getMessage().startswith("rpam: 12 bellezza items scored in ") for r in caplog.records)
    ablation = rpam_job.run(_job(folder, tmp_path, "bellezza", sample=12, normalise=False))
    assert len(counted) == 1
    # the same two correlations, labelled the other way round
    a, b = (r.aggregates.set_index(["normalised", "statistic"])["correlation"] for r in (first, ablation))
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index())

    calls = []
    real = rpam_suite.model_ratings
    monkeypatch.setattr(rpam_suite, "model_ratings", lambda *a, **k: calls.append(1) or real(*a, **k))
    down = rpam_job.run(_job(folder, tmp_path, "bellezza", sample=12, downstream=True, chat_template=False))
    assert len(counted) == 1 and len(calls) == 1  # RPAM passes shared with dataset=bellezza
    again = rpam_job.run(_job(folder, tmp_path, "bellezza", sample=12, downstream=True, chat_template=False))
    assert len(counted) == 1 and len(calls) == 1  # the generated answers are cached too
    pd.testing.assert_frame_equal(down.items, again.items)
    np.testing.assert_array_equal(down.items["score"], first.items["score"])
    model_loading._load_language_model.cache_clear()
