"""``intervention=lora`` in the app (docs/methods.md §13.5): a sweep trains each adapter once and every job reads it
from the cache, its rows carry the LM cost and the ``ft_*`` columns, the report names the metric it was trained
against, and the options it cannot take are refused by name before any training."""

from __future__ import annotations

import pandas as pd
import pytest
from family_specs import TINY

from jaxassoc.app import finetuning
from jaxassoc.app.finetuning import FINETUNE_COLUMNS
from jaxassoc.app.interventions import LM_COST_COLUMNS

BUDGET = ["intervention.steps=3", "intervention.batch_size=2", "intervention.seq_len=24",
          "intervention.evaluate_every=0", "intervention.lm_cost_tokens=200", "intervention.bias_batch=4"]  # fmt: skip


def _model(tiny_checkpoint):
    return ["model.name=tiny", f"model.source={tiny_checkpoint(TINY['gpt2'], n_positions=512)}"]


def _jobs(folder):
    out = {}
    for path in folder.glob("*/aggregates.parquet"):
        rows = pd.read_parquet(path)
        objective = rows["ft_objective"].iloc[0] if "ft_objective" in rows else "none"
        out[objective] = (path.parent, rows)
    return out


@pytest.mark.slow
def test_a_sweep_trains_each_adapter_once_and_every_job_reads_it(tmp_path, tiny_checkpoint, cli, monkeypatch):
    args = ["-m", "metric=crows_pairs", "dataset.sample=12", *_model(tiny_checkpoint), "intervention=none,lora",
            "intervention.objective=cda,metric", "intervention.metric=crows_pairs", *BUDGET,
            f"cache_dir={tmp_path / 'cache'}"]  # fmt: skip
    first = cli("jaxassoc", *args, "hydra.sweep.dir=one", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    jobs = _jobs(tmp_path / "one")
    assert set(jobs) == {"none", "cda", "metric"}
    none = jobs["none"][1]
    assert not set(FINETUNE_COLUMNS) & set(none)
    for objective in ("cda", "metric"):
        folder, rows = jobs[objective]
        assert set(FINETUNE_COLUMNS) | set(LM_COST_COLUMNS) <= set(rows)
        row = rows.iloc[0]
        assert row["ft_steps"] == 3 and row["ft_trained_parameters"] > 0 and row["lm_ppl"] != row["lm_ppl_none"]
        history = pd.read_csv(folder / "finetune_history.csv")
        assert list(history["step"]) == [0, 1, 2, 3]  # step 0 and the last evaluated (evaluate_every=0)
    metric = jobs["metric"][1].iloc[0]
    assert metric["ft_bias_metric"] == "crows_pairs" and bool(metric["ft_this_metric_trained"])
    assert 0 <= metric["ft_bias_heldout_after"] <= 0.5 and 0 <= metric["ft_bias_train_before"] <= 0.5
    history = pd.read_csv(jobs["metric"][0] / "finetune_history.csv")
    assert {"crows_pairs surrogate train", "crows_pairs real train", "crows_pairs real heldout"} <= set(history)
    assert len(list((tmp_path / "cache" / "lora_adapter").glob("*.npz"))) == 2  # cda (both rows) and metric
    assert not list((tmp_path / "cache").glob("lora_checkpoints/*.safetensors"))  # removed once the entry exists
    assert cli("jaxassoc-report", "one", cwd=tmp_path).returncode == 0
    report = (tmp_path / "one" / "report" / "report.md").read_text()
    assert "**Fine-tuned against a bias**" in report and "the crows_pairs rows of this adapter include" in report

    monkeypatch.setattr(finetuning, "_TRAINED", {})  # as a new process: the adapters come from the cache
    again = cli("jaxassoc", *args, "hydra.sweep.dir=two", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    log = "".join(p.read_text() for p in (tmp_path / "two").glob("*/main.log"))
    assert "cache hit: lora_adapter" in log and "intervention=lora: training" not in log
    twice = _jobs(tmp_path / "two")
    for objective in ("cda", "metric"):
        pd.testing.assert_frame_equal(
            twice[objective][1].filter(regex="^(metric_score|ft_|lm_)"),
            jobs[objective][1].filter(regex="^(metric_score|ft_|lm_)"),
        )


@pytest.mark.parametrize(
    "options, message",
    [
        (["intervention.objective=metric", "intervention.metric=seat"],
         "intervention.metric='seat' has no differentiable score to train against; metrics that have one: "
         "['crows_pairs', 'rpam', 'unstereo']"),
        (["intervention.objective=metric"], "intervention.objective=metric needs intervention.metric=<name>"),
        pytest.param(["intervention.rank=0"], "intervention.rank=0: an adapter's rank must be at least 1", marks=pytest.mark.slow),
        (["intervention.layers=all"], "intervention.layers='all': give a list of layer indices, or '*' for every layer"),
        pytest.param(["intervention.rank=1000"], "LoRA rank 1000 for attn.q", marks=pytest.mark.slow),
        pytest.param(["intervention.targets=[mlp.gate]"], "the gpt2 family has no projection 'mlp.gate' to adapt; its projections", marks=pytest.mark.slow),
        pytest.param(["intervention.batch_size=3", "intervention.accumulate=2"], "intervention.batch_size=3 is not a multiple of", marks=pytest.mark.slow),
        pytest.param(["intervention.objective=fancy"], "intervention.objective='fancy': choose one of ['cda', 'metric']", marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_options_a_lora_job_cannot_take_are_refused_by_name(tmp_path, tiny_checkpoint, cli, options, message):
    out = cli("jaxassoc", "metric=crows_pairs", "dataset.sample=4", *_model(tiny_checkpoint), "intervention=lora",
              *options, "intervention.steps=1", f"cache_dir={tmp_path / 'cache'}", "hydra.run.dir=r", cwd=tmp_path)  # fmt: skip
    assert out.returncode != 0
    assert message in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "cache" / "lora_adapter").exists()  # refused before any training
