"""The per-stage log line and quiet progress bars of jaxassoc.app.stages."""

import logging

import pytest

from jaxassoc.app.stages import progress, stage


def test_stage_logs_one_line_with_count_and_time(caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    with stage("rpam", "prompts scored") as s:
        s.count = 1234
    lines = [r.getMessage() for r in caplog.records if r.name == "jaxassoc"]
    assert len(lines) == 1
    assert lines[0].startswith("rpam: 1,234 prompts scored in ")
    assert lines[0].endswith(" s")
    assert s.seconds is not None and s.seconds >= 0.0


def test_stage_without_count_and_quiet_logger(caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    with stage("weat", "whitening fitted"):
        pass
    assert [r.getMessage() for r in caplog.records][-1].startswith("weat: whitening fitted in ")
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="jaxassoc")  # what quiet=true does
    with stage("weat", "vectors", 3):
        pass
    assert caplog.records == []


def test_stage_that_raises_logs_nothing(caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    with pytest.raises(ValueError):
        with stage("rpam", "prompts scored", 3):
            raise ValueError("boom")
    assert caplog.records == []


def test_progress_bar_on_stderr_unless_quiet(capsys):
    assert list(progress(range(5), "scoring", quiet=False)) == list(range(5))
    assert "scoring" in capsys.readouterr().err
    items = [1, 2, 3]
    assert progress(items, "scoring", quiet=True) is items
    assert list(progress(items, "scoring", quiet=True)) == items
    assert capsys.readouterr().err == ""
