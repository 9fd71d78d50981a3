"""``metric=set`` over several templates on a tiny Llama: one stage line per template and per chunk of
prompts, each finished chunk cached as it goes, and a run killed mid-template resumes at its first
unfinished chunk and ends with the very results of an uninterrupted run."""

import dataclasses
import logging
import re

import pandas as pd
import pytest

from app_helpers import run_metric, start_hydra
from jaxassoc import data
from jaxassoc.readouts import stereotypes as pipeline
from models_helpers import save_tiny_checkpoint

TEMPLATES = ["Most <pgroup> are <mask>.", "The <sgroup> is <mask>."]

hydra_context = pytest.fixture(start_hydra)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("set_resume"), "llama", seed=3, max_position_embeddings=128)


def overrides(llama, cache):
    return ["metric=set", "dataset=abc", f"model.source={llama}", "model.name=tiny", "model.kind=causal",
            "model.batch_size=16", "metric.templates=[" + ",".join(f"'{t}'" for t in TEMPLATES) + "]",
            f"cache_dir={cache}"]


@pytest.fixture
def pole_words_only(monkeypatch):
    """Each trait pole scored by its own word only (32 words instead of 117): a quarter of the prompts."""
    abc = data.load_abc()
    monkeypatch.setattr(data, "load_abc", lambda: dataclasses.replace(
        abc, traits={pole: synonyms[:1] for pole, synonyms in abc.traits.items()}))


class Interrupt(Exception):
    pass


def counting(monkeypatch, fail_at: int | None = None) -> list[int]:
    """Count the chunks whose prompts run through the model; raise on chunk ``fail_at`` (1-based)."""
    calls, packed_hidden = [], pipeline._packed_hidden

    def counted(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_at:
            raise Interrupt("killed")
        return packed_hidden(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_packed_hidden", counted)
    return calls


def chunks_logged(caplog, template: int) -> list[str]:
    """The chunk stage lines of template ``template`` (1-based) of 2."""
    return [m for r in caplog.records if r.name == "jaxassoc"
            for m in [r.getMessage()] if re.match(rf"set: [\d,]+ prompts scored \(template {template}/2, chunk ", m)]


def test_interrupted_all_templates_job_resumes_at_its_chunk_and_matches_a_clean_run(
        tmp_path, llama, hydra_context, pole_words_only, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    calls = counting(monkeypatch)
    clean = run_metric(overrides(llama, tmp_path / "clean"), tmp_path / "out")
    first, second = len(chunks_logged(caplog, 1)), len(chunks_logged(caplog, 2))
    assert first >= 3 and second >= 3 and len(calls) == first + second
    assert re.search(rf"chunk {second}/{second}\) in [\d.]+ s$", chunks_logged(caplog, 2)[-1])

    fail_at = first + 2  # the second template's second chunk: one template and one chunk are done
    counting(monkeypatch, fail_at=fail_at)
    with pytest.raises(Interrupt):
        run_metric(overrides(llama, tmp_path / "resumed"), tmp_path / "out")

    calls = counting(monkeypatch)
    caplog.clear()
    resumed = run_metric(overrides(llama, tmp_path / "resumed"), tmp_path / "out")
    assert len(calls) == second - 1  # only the unfinished chunks ran again
    pd.testing.assert_frame_equal(resumed.items, clean.items)
    pd.testing.assert_frame_equal(resumed.aggregates, clean.aggregates)

    lines = [r.getMessage() for r in caplog.records if r.name == "jaxassoc"]
    for i, template in enumerate(TEMPLATES, start=1):
        assert any(line.startswith(f"set: template {i}/2 {template!r} scored in ") for line in lines), lines
    assert chunks_logged(caplog, 1) == []  # the finished template is read back whole
    assert len(chunks_logged(caplog, 2)) == second  # its first chunk read back, the others computed
