"""One sweep, bias-bench's table (issue 40, point 5): each metric of a sweep on its own default dataset, every
intervention compared with ``none`` on the same items (exact McNemar, paired bootstraps:
:mod:`jaxassoc.stats.paired`, :mod:`jaxassoc.app.comparisons`), the interventions x models table and figure
of the sweep report."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from app_helpers import start_hydra
from family_specs import TINY

from jaxassoc.app.report import intervention_comparisons
from jaxassoc.stats.paired import (
    discordant,
    mcnemar_exact,
    paired_effect_size_difference,
    paired_mean_difference,
)

FIT = ["intervention.max_sentences=40", "intervention.lm_cost_tokens=300"]


def _indices(key, sizes: list[int], n_resamples: int) -> list[list[np.ndarray]]:
    """The rows jaxassoc.stats.bootstrap draws in resample r: split(key, R)[r], one uint32 per row of every
    group, row = floor(bits * n / 2^32) (exact in uint64)."""
    out = []
    for k in jax.random.split(key, n_resamples):
        bits = np.asarray(jax.random.bits(k, (sum(sizes),), jnp.uint32)).astype(np.uint64)
        offsets = np.cumsum([0, *sizes])
        out.append([((bits[o : o + n] * np.uint64(n)) >> np.uint64(32)).astype(int) for o, n in zip(offsets, sizes)])
    return out


def _percentile(samples, confidence):
    return np.quantile(samples, [(1 - confidence) / 2, (1 + confidence) / 2])


def _p(difference, samples):
    other = (samples <= 0) if difference >= 0 else (samples >= 0)
    return min(1.0, 2 * (other.sum() + 1) / (len(samples) + 1))


def test_mcnemar_is_the_exact_binomial_of_the_discordant_pairs():
    before = np.array([1] * 7 + [0] * 2 + [1] * 5 + [0] * 6, bool)  # 7 pairs 1 -> 0, 2 pairs 0 -> 1
    after = np.array([0] * 7 + [1] * 2 + [1] * 5 + [0] * 6, bool)
    assert discordant(before, after) == (7, 2)
    # two-sided: 2 P(K <= 2), K ~ Bin(9, 1/2) = 2 (1 + 9 + 36) / 512
    assert mcnemar_exact(7, 2).p_value == pytest.approx(92 / 512, rel=1e-12)
    assert mcnemar_exact(2, 7).p_value == mcnemar_exact(7, 2).p_value
    assert mcnemar_exact(0, 0).p_value == 1.0
    assert mcnemar_exact(3, 3).p_value == 1.0  # 2 P(K <= 3), K ~ Bin(6, 1/2) = 2 * 42/64 > 1, capped


def test_paired_bootstraps_are_numpy_loops_over_the_same_draws():
    rng = np.random.default_rng(0)
    n, R, conf = 15, 200, 0.9
    a, b = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    key = jax.random.key(3)
    got = paired_mean_difference(key, a, b, n_resamples=R, confidence=conf)
    draws = np.array([a[i].mean() - b[i].mean() for (i,) in _indices(key, [n], R)])
    # float32 means of 15 values: relative rounding ~15 * 2^-24 of |values| <= ~3
    tol = 16 * n * 2.0**-24 * 3
    assert float(got.difference) == pytest.approx(a.mean() - b.mean(), abs=tol)
    np.testing.assert_allclose([got.low, got.high], _percentile(draws, conf), atol=tol)
    assert float(got.p_value) == pytest.approx(_p(a.mean() - b.mean(), draws))

    in_x = np.array([True] * 6 + [False] * 9)
    sa, sb = rng.normal(size=n).astype(np.float32), (rng.normal(size=n) + 0.5).astype(np.float32)

    def d(s, x, y):
        both = np.concatenate([s[x], s[y]])
        return (s[x].mean() - s[y].mean()) / both.std(ddof=1)

    xs, ys = np.flatnonzero(in_x), np.flatnonzero(~in_x)
    got = paired_effect_size_difference(key, sa, sb, in_x, ddof=1, n_resamples=R, confidence=conf)
    draws = np.array([d(sa, xs[i], ys[j]) - d(sb, xs[i], ys[j]) for i, j in _indices(key, [6, 9], R)])
    observed = d(sa, xs, ys) - d(sb, xs, ys)
    tol = 1e-4  # float32 d of values ~N(0, 1): mean and std each to a few ulps, |d| < 5
    assert float(got.difference) == pytest.approx(observed, abs=tol)
    np.testing.assert_allclose([got.low, got.high], _percentile(draws[np.isfinite(draws)], conf), atol=tol)
    assert float(got.p_value) == pytest.approx(_p(observed, draws))


@pytest.fixture
def hydra_conf():
    yield from start_hydra()


def test_a_sweep_of_three_metrics_reads_each_metrics_own_default_dataset(hydra_conf):
    from hydra import compose

    from jaxassoc.app.cli import _jobs, with_default_dataset

    argv = ["-m", "model=gpt2", "intervention=none,leace", "metric=crows_pairs,seat,unstereo"]
    own = {"crows_pairs": "crows_pairs", "unstereo": "use10", "stereoset": "stereoset"}
    assert with_default_dataset(argv, own) == argv  # no dataset= added: each job picks its metric's own
    jobs = _jobs(argv[1:])
    assert len(jobs) == 6
    read = {
        (c.metric.name, c.intervention.name, c.dataset.name) for c in (compose("config", overrides=j) for j in jobs)
    }
    assert read == {
        (m, i, d)
        for m, d in (("crows_pairs", "crows_pairs"), ("seat", "weat_caliskan2017"), ("unstereo", "use10"))
        for i in ("none", "leace")
    }
    named = {compose("config", overrides=[*j, "dataset=use5"]).dataset.name for j in jobs}
    assert named == {"use5"}  # dataset= on the command line applies to every job


@pytest.mark.slow  # a sweep of four tiny-model jobs and its report: ~15 s
def test_one_sweep_gives_the_paired_comparisons_and_bias_benchs_table(tmp_path, tiny_checkpoint, cli):
    model = ["model.name=tiny", f"model.source={tiny_checkpoint(TINY['gpt2'], n_positions=512)}"]
    sweep = cli("jaxassoc", "-m", "metric=crows_pairs,unstereo", "dataset.sample=12", *model,
                "intervention=none,leace", "intervention.site=layers.1.resid_post", *FIT,
                "hydra.sweep.dir=sweep", cwd=tmp_path)  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    folder = tmp_path / "sweep"
    datasets = {
        pd.read_parquet(p)["prov_metric"].iloc[0]: pd.read_parquet(p)["prov_dataset"].iloc[0]
        for p in folder.glob("*/aggregates.parquet")
    }
    assert datasets == {"crows_pairs": "crows_pairs", "unstereo": "use10"}  # each its own default
    report = cli("jaxassoc-report", folder)
    assert report.returncode == 0, report.stderr[-3000:]
    found = pd.read_parquet(folder / "report" / "comparisons.parquet")
    pd.testing.assert_frame_equal(intervention_comparisons(folder).drop(columns=["job", "job_none"]),
                                  found.drop(columns=["job", "job_none"]), check_dtype=False)  # fmt: skip
    assert set(found["quantity"]) == {"metric_score", "us_score", "preference_disparity"}
    assert (found["intervention"] == "leace gender @ layers.1.resid_post").all()
    assert found["lm_ppl"].notna().all() and found["lm_ppl_none"].notna().all()

    crows = found[found["metric"] == "crows_pairs"].iloc[0]
    by = {}
    for p in folder.glob("*/items.parquet"):
        agg = pd.read_parquet(p.parent / "aggregates.parquet")
        if agg["prov_metric"].iloc[0] == "crows_pairs":
            by[agg["prov_intervention"].iloc[0]] = pd.read_parquet(p)["score"].to_numpy(bool)
    b = int((by["none"] & ~by["leace"]).sum())
    c = int((~by["none"] & by["leace"]).sum())
    assert (crows["b"], crows["c"]) == (b, c)
    k, n = min(b, c), b + c
    hand = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
    assert crows["delta_p"] == pytest.approx(hand, rel=1e-9)
    assert crows["delta"] == pytest.approx(100 * (by["leace"].mean() - by["none"].mean()), abs=1e-9)
    assert crows["delta_ci_low"] <= crows["delta"] <= crows["delta_ci_high"]

    text = (folder / "report" / "report.md").read_text()
    section = text.split("### Interventions x models")[1].split("###")[0]
    header, _, *rows = [line for line in section.splitlines() if line.startswith("|")]
    assert header.split(" | ")[:2] == ["| intervention", "model"]
    assert "crows_pairs (metric_score)" in header and "unstereo (us_score)" in header and "lm_ppl_none" in header
    assert [r.split(" | ")[0] for r in rows] == ["| none", "| leace gender @ layers.1.resid_post"]
    assert "(Δ " in rows[1] and "(Δ " not in rows[0]
    assert rows[0].rstrip(" |").split(" | ")[-2:] == [rows[1].rstrip(" |").split(" | ")[-1]] * 2  # none: lm_ppl_none
    assert (folder / "report" / "intervention_cost.png").exists() and "intervention_cost.png" in text
