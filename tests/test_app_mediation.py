"""``jaxassoc metric=mediation`` end to end on a tiny GPT-2 whose tokenizer keeps the pronouns, "man",
"woman" and a few professions whole: the default dataset follows the metric, one row per head with integer
``layer`` and ``head``, ``total_effect`` recomputed from the per-example rows, the heatmaps in the report,
and the inputs the metric cannot take refused by name."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from family_specs import TINY, tiny_tokenizer

CORPUS = [
    "The doctor said that he would help the nurse.",
    "The nurse said that she would help the man.",
    "The woman said that he ran because she cried.",
    "The teacher and the engineer said that he and she ran because the man and the woman slept.",
    "The teacher said that the engineer ran because the teacher and the engineer cried.",
    "The doctor said that the doctor ran because the nurse and the doctor cried.",
] * 6
PROFESSIONS = [["doctor", 0.0, 0.5], ["teacher", 0.0, -0.5], ["engineer", 0.1, 0.6], ["nurse", 0.0, -0.9],
               ["astronaut", 0.0, 0.3], ["clerk", 0.0, 0.0]]  # fmt: skip


def _model(tiny_checkpoint, tmp_path):
    folder = tiny_checkpoint(TINY["gpt2"], n_positions=256, into=tmp_path)
    tiny_tokenizer("gpt2", corpus=CORPUS, vocab_size=320).save_pretrained(folder)
    return folder


def test_mediation_on_a_tiny_gpt2(tmp_path, tiny_checkpoint, cli):
    folder = _model(tiny_checkpoint, tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(PROFESSIONS))
    (tmp_path / "t.txt").write_text("The {} said that\nThe {} ran because\n")
    common = ["metric=mediation", "model.name=tiny", f"model.source={folder}", "hydra.run.dir=out"]
    proc = cli(
        "jaxassoc", *common, "dataset.path=p.json", "dataset.templates=t.txt", "metric.neurons_per_layer=2",
        "metric.batch_size=3", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    agg = pd.read_parquet(tmp_path / "out" / "aggregates.parquet")
    items = pd.read_parquet(tmp_path / "out" / "items.parquet")
    assert (agg["prov_dataset"] == "vig_professions").all()
    # "astronaut" is not one token for this tokenizer, "clerk" has no stereotype: 4 professions x 2 templates
    assert len(items) == 8 and set(items["profession"]) == {"doctor", "teacher", "engineer", "nurse"}
    said = "examples dropped for tiny: the profession is not one token where its set-gender word is (astronaut)"
    assert said in proc.stdout + proc.stderr  # the console says how many and why
    assert (items.loc[items["stereotype"] == "female", "set_gender"] == "man").all()
    heads = agg[agg["component"] == "head"]
    assert len(heads) == 2 * 4 and str(heads["layer"].dtype) == "Int64" and str(heads["head"].dtype) == "Int64"
    assert sorted(zip(heads["layer"], heads["head"])) == [(i, h) for i in range(2) for h in range(4)]
    total = agg.loc[agg["component"] == "total", "total_effect"].item()
    assert np.isclose(total, (items["y_set_gender"] / items["y_null"] - 1).mean(), rtol=0, atol=1e-6)  # float32 y
    assert (agg["total_effect"] == total).all() and (agg["n"] == 8).all()
    # CIs over the 4 professions: any resampled mean lies between the professions' own means
    by_profession = (items["y_set_gender"] / items["y_null"] - 1).groupby(items["profession"]).mean()
    low, high = agg[["total_ci_low", "total_ci_high"]].iloc[0]
    assert by_profession.min() - 1e-6 <= low <= high <= by_profession.max() + 1e-6 and low < high
    assert (agg["n_professions"] == 4).all()
    assert (heads["indirect_ci_low"] <= heads["indirect_ci_high"]).all()
    assert (heads["direct_ci_low"] <= heads["direct_ci_high"]).all()
    assert "fewer than 5 professions: these CIs resample a handful of values" in proc.stdout
    assert len(agg[agg["component"] == "neuron"]) == 2 * 2
    assert "top 8 heads by indirect effect" in proc.stdout
    report = cli("jaxassoc-report", "out", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "out" / "report" / "heads_mediation.png").is_file()


@pytest.mark.slow
def test_mediation_on_a_2x4_mesh_equals_one_device(tmp_path, tiny_checkpoint, cli):
    folder = _model(tiny_checkpoint, tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(PROFESSIONS))
    found = {}
    for name, extra in (("single", []), ("mesh", ["mesh=fsdp_tp", "mesh.fsdp=2", "mesh.tp=4"])):
        proc = cli("jaxassoc", "metric=mediation", "model.name=tiny", f"model.source={folder}", "dataset.path=p.json",
                   "metric.templates=1", f"hydra.run.dir={name}", "cache_dir=null", *extra, cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        found[name] = pd.read_parquet(tmp_path / name / "aggregates.parquet")
    for column in ("indirect_effect", "direct_effect", "total_effect"):
        np.testing.assert_allclose(found["mesh"][column], found["single"][column], rtol=1e-3, atol=1e-7)


def test_inputs_mediation_cannot_take_are_refused(tmp_path, tiny_checkpoint, cli):
    common = ["metric=mediation", "model.name=tiny", "hydra.run.dir=out"]
    wrong = cli("jaxassoc", *common, f"model.source={_model(tiny_checkpoint, tmp_path)}", "dataset=crows_pairs",
                cwd=tmp_path)  # fmt: skip
    assert wrong.returncode != 0 and "use dataset=vig_professions, not 'crows_pairs'" in wrong.stderr
    masked = cli("jaxassoc", *common, f"model.source={tiny_checkpoint('bert')}", "model.kind=masked", cwd=tmp_path)
    assert masked.returncode != 0 and "mediation" in masked.stderr and "masked" in masked.stderr
    split = cli("jaxassoc", *common, f"model.source={tiny_checkpoint('gpt2')}", cwd=tmp_path)  # pronouns split
    assert split.returncode != 0 and "needs 'she' to be one token after a sentence" in split.stderr


@pytest.mark.slow  # mediation, then a 2-job sweep: ~34 s (issue 38: the default suite's budget)
def test_ablating_the_top_mediating_heads_moves_another_metric(tmp_path, tiny_checkpoint, cli):
    folder = _model(tiny_checkpoint, tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(PROFESSIONS))
    model = ["model.name=tiny", f"model.source={folder}"]
    found = cli("jaxassoc", "metric=mediation", *model, "dataset.path=p.json", "metric.neurons_per_layer=1",
                "hydra.run.dir=med", cwd=tmp_path)  # fmt: skip
    assert found.returncode == 0, found.stderr[-3000:]
    sweep = cli("jaxassoc", "-m", "metric=unstereo", "dataset=use5", "dataset.sample=12", *model,
                "intervention=none,ablate", "intervention.from_mediation=med", "intervention.top_heads=2",
                "intervention.top_neurons=1", "hydra.sweep.dir=sweep", cwd=tmp_path)  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    found = [pd.read_parquet(p) for p in (tmp_path / "sweep").glob("*/items.parquet")]
    jobs = {frame["prov_intervention"].iloc[0]: frame for frame in found}
    assert set(jobs) == {"none", "ablate"}
    proc = sweep
    agg = pd.read_parquet(tmp_path / "med" / "aggregates.parquet")
    top = agg[agg["component"] == "head"].sort_values("indirect_effect", ascending=False).head(2)
    assert (
        "intervention: heads " + " ".join(sorted(f"{r.layer}.{r.head}" for r in top.itertuples()))
        in proc.stdout + proc.stderr
    )
    assert (jobs["ablate"]["prov_intervention"] == "ablate").all() and (
        jobs["none"]["prov_intervention"] == "none"
    ).all()
    assert np.abs(jobs["ablate"]["FM_logprob"] - jobs["none"]["FM_logprob"]).max() > 1e-4
    report = cli("jaxassoc-report", "sweep", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    text = (tmp_path / "sweep" / "report" / "report.md").read_text()
    assert "varying: `intervention.name`" in text and "| intervention |" in text


def test_interventions_the_job_cannot_take_are_refused(tmp_path, tiny_checkpoint, cli):
    folder = _model(tiny_checkpoint, tmp_path)
    model = ["model.name=tiny", f"model.source={folder}", "hydra.run.dir=out"]
    mediation = cli("jaxassoc", "metric=mediation", *model, "intervention=ablate", "intervention.heads=[[0,1]]",
                    cwd=tmp_path)  # fmt: skip
    assert mediation.returncode != 0 and "metric=mediation intervenes on the model itself" in mediation.stderr
    far = cli("jaxassoc", "metric=unstereo", "dataset=use5", *model, "intervention=ablate",
              "intervention.heads=[[0,9]]", cwd=tmp_path)  # fmt: skip
    assert far.returncode != 0 and "head [0, 9]: head 9 is out of range; each layer has heads 0..3" in far.stderr
    empty = cli("jaxassoc", "metric=unstereo", "dataset=use5", *model, "intervention=ablate", cwd=tmp_path)
    assert empty.returncode != 0 and "intervention=ablate needs intervention.heads" in empty.stderr
    static = cli("jaxassoc", "metric=weat", "model=glove-6b-50d", "intervention=ablate", "intervention.heads=[[0,1]]",
                 "hydra.run.dir=out", cwd=tmp_path)  # fmt: skip
    assert static.returncode != 0 and "static word vectors" in static.stderr


def test_a_mediation_result_of_other_weights_or_none_at_all_is_refused(tmp_path, tiny_checkpoint, cli):
    folder = _model(tiny_checkpoint, tmp_path)
    model = ["model.name=tiny", f"model.source={folder}", "hydra.run.dir=out", "dataset=use5", "dataset.sample=4"]
    ablate = ["metric=unstereo", "intervention=ablate", "intervention.top_heads=1"]
    missing = cli("jaxassoc", *ablate, *model, "intervention.from_mediation=nowhere", cwd=tmp_path)
    assert missing.returncode != 0 and "intervention.from_mediation='nowhere': cannot read" in missing.stderr
    assert "tiny loaded" not in missing.stdout + missing.stderr  # refused before the model loads
    other = pd.DataFrame(  # a mediation result of another model: its rows record other weights
        {"component": ["head", "head"], "layer": [0, 1], "head": [1, 2], "indirect_effect": [0.2, 0.1]}
    ).assign(prov_model_weights_sha256="ab" * 32)
    (tmp_path / "other").mkdir()
    other.to_parquet(tmp_path / "other" / "aggregates.parquet")
    refused = cli("jaxassoc", *ablate, *model, "intervention.from_mediation=other", cwd=tmp_path)
    assert refused.returncode != 0
    assert "was computed on other weights (sha256 abababababab...) than model 'tiny'" in refused.stderr
    assert not (tmp_path / "out" / "results.json").exists()
