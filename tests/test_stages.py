"""The per-stage log line and quiet progress bars of jaxassoc.progress."""

import io
import logging

import pytest

from jaxassoc import progress as progress_module
from jaxassoc.progress import bars_wanted, progress, stage


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


def test_progress_bar_on_stderr_unless_quiet(capsys, monkeypatch):
    monkeypatch.setattr(progress_module, "bars_wanted", lambda stream=None: True)  # as on a terminal
    assert list(progress(range(5), "scoring", quiet=False)) == list(range(5))
    assert "scoring" in capsys.readouterr().err
    items = [1, 2, 3]
    assert list(progress(items, "scoring", quiet=True)) == items
    assert capsys.readouterr().err == ""


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_bar_when_stderr_is_not_a_terminal(capsys, monkeypatch):
    """A log file or a pipe gets no carriage-return bars: the heartbeat's log lines report progress there."""
    assert bars_wanted(Terminal()) and not bars_wanted(io.StringIO())
    monkeypatch.delitem(__import__("sys").modules, "ipykernel", raising=False)
    items = [1, 2, 3]
    assert list(progress(items, "scoring", quiet=False)) == items  # pytest's captured stderr is no terminal
    assert capsys.readouterr().err == ""


def test_a_loop_without_a_bar_logs_done_total_and_time_left_every_30_seconds(caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    ticks = iter([0.0, 10.0, 31.0, 40.0, 62.0, 70.0, 75.0, 80.0, 85.0, 88.0, 90.0])  # the clock after each item
    out = list(progress_module.heartbeat(range(10), "mediation: every head", unit="batch", clock=lambda: next(ticks)))
    assert out == list(range(10))
    lines = [r.getMessage() for r in caplog.records if r.name == "jaxassoc"]
    # item 2 done at 31 s (31 s per 2: 124 s for the other 8), item 4 at 62 s (62 s for the other 6)
    assert lines == [
        "mediation: every head: 2/10 batches (20 %) in 31 s, about 2 min 4 s left",
        "mediation: every head: 4/10 batches (40 %) in 1 min 2 s, about 1 min 33 s left",
    ]
    caplog.clear()
    ticks = iter([0.0, 45.0, 3700.0])
    list(progress_module.heartbeat(iter("ab"), "vectors", unit="chunk", clock=lambda: next(ticks)))  # no len
    assert [r.getMessage() for r in caplog.records] == ["vectors: 1 chunk in 45 s", "vectors: 2 chunks in 1 h 01 min"]


@pytest.mark.slow  # three CLI runs, ~45 s on 2 cores
def test_cli_stage_lines_and_bars_then_quiet_mode_silences_them(tmp_path, tiny_checkpoint, cli, monkeypatch):
    """A real job on a tiny GPT-2: stage lines and progress bars (stderr taken for a terminal); quiet=true
    keeps only the results."""
    monkeypatch.setattr(progress_module, "bars_wanted", lambda stream=None: True)
    common = [
        "metric=rpam",
        "dataset=wordsim353",
        "dataset.sample=6",
        "template=tp1",
        "model.name=tiny",
        "cache_dir=null",
    ]

    # a private copy of the checkpoint per run: the process's model cache misses, so each run loads the model
    folders = {run: tiny_checkpoint("gpt2", into=tmp_path / f"model-{run}") for run in ("loud", "quiet")}

    def run(folder, *overrides):
        proc = cli(
            "jaxassoc", *common, f"model.source={folder}", *overrides, cwd=tmp_path, env={"HYDRA_FULL_ERROR": "0"}
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc

    loud = run(folders["loud"], "hydra.run.dir=loud")
    assert "model: tiny loaded (gpt2, safetensors, float32) in " in loud.stdout + loud.stderr
    assert "rpam: 6 wordsim353 items scored in " in loud.stdout + loud.stderr
    assert "batches" in loud.stderr  # the scoring loop's tqdm bar
    quiet = run(folders["quiet"], "hydra.run.dir=quiet", "quiet=true")
    assert "loaded" not in quiet.stdout + quiet.stderr and "items scored" not in quiet.stdout + quiet.stderr
    assert "batches" not in quiet.stderr
    assert (tmp_path / "quiet" / "results.json").is_file()
    # errors still reach the user in quiet mode
    bad = cli(
        "jaxassoc",
        *common,
        f"model.source={folders['loud']}",
        "dataset=abc",
        "quiet=true",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    assert bad.returncode != 0 and "jaxassoc: error:" in bad.stderr and "dataset=abc" in bad.stderr


def test_job_bars_and_stage_lines_off_in_quiet_mode(tmp_path, tiny_checkpoint, capsys, caplog, monkeypatch):
    """In process: the RPAM job shows its batch bar and stage line; with quiet it shows neither."""
    monkeypatch.setattr(progress_module, "bars_wanted", lambda stream=None: True)  # as on a terminal
    from jaxassoc.app import model_loading
    from jaxassoc.app.config import DatasetConfig, ModelConfig, StatsConfig, TemplateConfig, WhiteningConfig
    from jaxassoc.app.spec import Job
    from jaxassoc.app.tasks import rpam as rpam_job

    folder = tiny_checkpoint("gpt2")
    capsys.readouterr()

    def job(quiet):
        return Job(
            model=ModelConfig(name="tiny", source=str(folder)),
            metric=rpam_job.RpamMetricConfig(name="rpam"),
            dataset=DatasetConfig(name="wordsim353", sample=6),
            template=TemplateConfig(name="tp1", text="These words are associated: {target} and"),
            whitening=WhiteningConfig(),
            stats=StatsConfig(),
            seed=0,
            output_dir=tmp_path,
            quiet=quiet,
        )

    caplog.set_level(logging.INFO, logger="jaxassoc")
    rpam_job.run(job(quiet=False))
    assert "batches" in capsys.readouterr().err
    assert any(r.getMessage().startswith("rpam: 6 wordsim353 items scored in ") for r in caplog.records)
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="jaxassoc")  # what main does for quiet=true
    rpam_job.run(job(quiet=True))
    assert capsys.readouterr().err == ""
    assert caplog.records == []
    model_loading._load_language_model.cache_clear()
