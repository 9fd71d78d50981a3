"""``model.precision`` in the app (docs/methods.md §12): a sweep over policies computes each job in its own
precision (the cache never hands one policy's scores to another), the rows record the precision they ran in,
and the report names the jobs not computed in float32."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from family_specs import TINY


def test_a_sweep_over_precisions_keeps_them_apart_and_the_report_marks_them(tmp_path, tiny_checkpoint, cli):
    model = ["model.name=tiny", f"model.source={tiny_checkpoint(TINY['gpt2'], n_positions=512)}"]
    sweep = cli("jaxassoc", "-m", "metric=crows_pairs", "dataset.sample=12", *model,
                "model.precision=float32,mixed,auto", "cache_dir=cache", "hydra.sweep.dir=sweep", cwd=tmp_path)  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    jobs = {}
    for items in (tmp_path / "sweep").glob("*/items.parquet"):
        precision = pd.read_parquet(items.parent / "aggregates.parquet")["prov_model_precision"].iloc[0]
        jobs.setdefault(precision, []).append(pd.read_parquet(items)["sent_more_score"].to_numpy())
    assert sorted(jobs) == ["float32", "mixed"] and len(jobs["float32"]) == 2  # auto is float32 on a CPU
    np.testing.assert_array_equal(*jobs["float32"])
    assert np.abs(jobs["mixed"][0] - jobs["float32"][0]).max() > 0  # computed, not read from float32's entry
    assert cli("jaxassoc-report", tmp_path / "sweep").returncode == 0
    report = (tmp_path / "sweep" / "report" / "report.md").read_text()
    assert "**Not computed in float32**: tiny in mixed (1 job)" in report


@pytest.mark.slow  # two mediation jobs (the cache's bfloat16 round trip is in the default suite: test_app_cache_faults)
def test_mediation_runs_in_bfloat16_and_its_cached_effects_are_read_back(tmp_path, tiny_checkpoint, cli):
    """Under ``bfloat16`` a readout's arrays may be bfloat16: the log-odds reach the metric in float32 and the
    cache reads its bfloat16 entries back (a second run: hits, no 'ignoring the unreadable entry')."""
    import json

    from test_app_mediation import PROFESSIONS, _model

    folder = _model(tiny_checkpoint, tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(PROFESSIONS))
    (tmp_path / "t.txt").write_text("The {} said that\nThe {} ran because\n")
    args = ["metric=mediation", "model.name=tiny", f"model.source={folder}", "dataset.path=p.json",
            "dataset.templates=t.txt", "metric.neurons_per_layer=2", "model.precision=bfloat16", "cache_dir=cache"]  # fmt: skip
    first = cli("jaxassoc", *args, "hydra.run.dir=a", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    again = cli("jaxassoc", *args, "hydra.run.dir=b", cwd=tmp_path)
    assert again.returncode == 0 and "ignoring the unreadable entry" not in again.stdout + again.stderr
    a, b = (pd.read_parquet(tmp_path / run / "aggregates.parquet") for run in "ab")
    assert (a["prov_model_precision"] == "bfloat16").all()
    np.testing.assert_array_equal(a["total_effect"], b["total_effect"])
