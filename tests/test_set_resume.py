"""``metric=set`` over several templates on a tiny Llama (causal) and a tiny RoBERTa (masked): one stage line
per template and per chunk of prompts, each finished chunk cached as it goes, and a run killed
mid-template resumes at its first unfinished chunk and ends with the very results of an uninterrupted run."""

import logging
import re

import pandas as pd
import pytest
from app_helpers import run_metric, start_hydra

from jaxassoc.suites import stereotypes as causal
from jaxassoc.suites import stereotypes_mlm as masked

# two tiny models x three multi-template SeT runs each, ~65 s a model (issue 38: the default suite's budget)
pytestmark = pytest.mark.slow

TEMPLATES = ["Most <pgroup> are <mask>.", "The <sgroup> is <mask>."]

hydra_context = pytest.fixture(start_hydra)


# kind: (family, the function that runs one chunk's prompts through the model)
PATHS = {"causal": ("llama", causal, "packed_hidden"), "masked": ("roberta", masked, "write_in_head_inputs")}


@pytest.fixture(scope="module", params=sorted(PATHS))
def checkpoint(request, tiny_checkpoint):
    family = PATHS[request.param][0]
    return request.param, tiny_checkpoint(family, 3, max_position_embeddings=128)


def overrides(checkpoint, cache):
    kind, folder = checkpoint
    return [
        "metric=set",
        "dataset=abc",
        f"model.source={folder}",
        "model.name=tiny",
        f"model.kind={kind}",
        "model.batch_size=16",
        "metric.templates=[" + ",".join(f"'{t}'" for t in TEMPLATES) + "]",
        f"cache_dir={cache}",
    ]


class Interrupt(Exception):
    pass


def counting(monkeypatch, kind: str, fail_at: int | None = None) -> list[int]:
    """Count the chunks whose prompts run through the model; raise on chunk ``fail_at`` (1-based)."""
    _, module, name = PATHS[kind]
    calls, run_chunk = [], getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        if len(calls) == fail_at:
            raise Interrupt("killed")
        return run_chunk(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def chunks_logged(caplog, template: int) -> list[str]:
    """The chunk stage lines of template ``template`` (1-based) of 2."""
    return [
        m
        for r in caplog.records
        if r.name == "jaxassoc"
        for m in [r.getMessage()]
        if re.match(rf"set: [\d,]+ prompts scored \(template {template}/2, chunk ", m)
    ]


def test_interrupted_all_templates_job_resumes_at_its_chunk_and_matches_a_clean_run(
    tmp_path, checkpoint, hydra_context, pole_words_only, monkeypatch, caplog
):
    kind = checkpoint[0]
    monkeypatch.setattr(masked, "CHUNK_PROBLEMS", 128)  # a masked template's 640-odd problems in 5+ chunks
    caplog.set_level(logging.INFO, logger="jaxassoc")
    calls = counting(monkeypatch, kind)
    clean = run_metric(overrides(checkpoint, tmp_path / "clean"), tmp_path / "out")
    first, second = len(chunks_logged(caplog, 1)), len(chunks_logged(caplog, 2))
    assert first >= 3 and second >= 3 and len(calls) == first + second
    assert re.search(rf"chunk {second}/{second}\) in [\d.]+ s$", chunks_logged(caplog, 2)[-1])

    fail_at = first + 2  # the second template's second chunk: one template and one chunk are done
    counting(monkeypatch, kind, fail_at=fail_at)
    with pytest.raises(Interrupt):
        run_metric(overrides(checkpoint, tmp_path / "resumed"), tmp_path / "out")

    calls = counting(monkeypatch, kind)
    caplog.clear()
    resumed = run_metric(overrides(checkpoint, tmp_path / "resumed"), tmp_path / "out")
    assert len(calls) == second - 1  # only the unfinished chunks ran again
    pd.testing.assert_frame_equal(resumed.items, clean.items)
    pd.testing.assert_frame_equal(resumed.aggregates, clean.aggregates)

    lines = [r.getMessage() for r in caplog.records if r.name == "jaxassoc"]
    for i, template in enumerate(TEMPLATES, start=1):
        assert any(line.startswith(f"set: template {i}/2 {template!r} scored in ") for line in lines), lines
    assert chunks_logged(caplog, 1) == []  # the finished template is read back whole
    assert len(chunks_logged(caplog, 2)) == second  # its first chunk read back, the others computed
