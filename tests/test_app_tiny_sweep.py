"""A 2 x 2 sweep of a real metric on tiny checkpoints, its report, and the model-output cache."""

import re

import numpy as np
import pandas as pd
import pytest

from jaxassoc.array_cache import cache_key, cached_arrays


@pytest.fixture(scope="module")
def tiny_folders(tiny_checkpoint):
    return {  # a 256-token context: Winogender sentences are long for the tiny tokenizers
        "gpt2": tiny_checkpoint("gpt2", n_positions=256),
        "llama": tiny_checkpoint("llama", max_position_embeddings=256),
    }


@pytest.mark.slow  # a sweep on two tiny models: ~5 s (issue 38: the default suite's budget)
def test_unstereo_sweep_on_two_tiny_models_then_report_and_cache(tmp_path, tiny_folders, cli):
    sources = ",".join(str(p) for p in tiny_folders.values())
    sweep = [
        "-m",
        "metric=unstereo",
        "dataset=winogender",
        "dataset.sample=12",
        "model.name=tiny",
        f"model.source={sources}",
        "metric.aufc_units=parity,log10",
        "hydra.sweep.dir=sweep",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    first = cli("jaxassoc", *sweep, cwd=tmp_path, env={"HYDRA_FULL_ERROR": "0"})
    assert first.returncode == 0, first.stderr[-3000:]
    jobs = sorted(p.parent for p in (tmp_path / "sweep").rglob("results.json"))
    assert len(jobs) == 4
    # the two AuFC settings of one model share the forward passes: the second one is a cache hit
    assert (first.stderr + first.stdout).count("cache hit: sentence_logprobs") == 2
    items = [pd.read_parquet(j / "items.parquet") for j in jobs]
    for model_dir in tiny_folders.values():
        same_model = [t for t in items if (t["prov_model_source"] == str(model_dir)).all()]
        assert len(same_model) == 2
        np.testing.assert_array_equal(same_model[0]["M_logprob"], same_model[1]["M_logprob"])
        assert (same_model[0]["prov_model_weights_sha256"] != "").all()
    report = cli("jaxassoc-report", tmp_path / "sweep")
    assert report.returncode == 0, report.stderr
    table = pd.read_parquet(tmp_path / "sweep" / "report" / "table.parquet")
    assert table["job"].nunique() == 4 and set(table["subset"]) >= {"unconstrained", "0.3"}
    text = (tmp_path / "sweep" / "report" / "report.md").read_text()
    section = text.split("## UnStereoEval (`metric=unstereo`)")[1]
    assert "varying: `model.source`, `metric.aufc_units`" in section
    header, _, *rows = [line for line in section.splitlines() if line.startswith("|")]
    assert (
        header == "| model.source | metric.aufc_units | subset | n | us_score | us_std_error | "
        "preference_disparity | male_rel_ratio | aufc_log10 | aufc_parity |"
    )  # one unit per column: a row of one setting leaves the other's column empty
    assert len(rows) == 4 * 6 and "nan" not in text.lower()
    assert {r.split(" | ")[0] for r in rows} == {f"| {p.name}" for p in tiny_folders.values()}  # folders, by name
    assert all(re.fullmatch(r"\d+", r.split(" | ")[3]) for r in rows)  # n: a count, no decimals


def test_cache_hit_is_bit_identical_to_recomputation(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"x": np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32), "n": np.arange(4)}

    parts = {"weights": "abc", "sentences": ["a b", "c"]}
    fresh = cached_arrays(tmp_path, "demo", parts, compute)
    again = cached_arrays(tmp_path, "demo", parts, compute)
    assert len(calls) == 1
    for name in fresh:
        assert fresh[name].dtype == again[name].dtype
        assert fresh[name].tobytes() == again[name].tobytes()
    assert cache_key("demo", parts) != cache_key("demo", {**parts, "sentences": ["a b", "d"]})
    cached_arrays(tmp_path, "demo", {**parts, "weights": "abd"}, compute)
    assert len(calls) == 2  # another model: recomputed
