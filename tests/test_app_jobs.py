"""The WEAT job through the CLI (in process) on the embedded GloVe-50d, against docs/methods.md's reference
values."""

import numpy as np
import pandas as pd
import pytest

from jaxassoc.embeddings import load_zca


@pytest.mark.slow  # the GloVe W1-W10 job with whitening: ~17 s (issue 38: the default suite's budget)
def test_weat_job_on_glove_matches_methods_reference_values(tmp_path, cli):
    proc = cli(
        "jaxassoc",
        "metric=weat",
        "model=glove-6b-50d",
        "whitening=zca",
        "stats.n_permutations=2000",
        "stats.n_bootstrap=200",
        "hydra.run.dir=run",
        "cache_dir=null",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    table = pd.read_parquet(run / "aggregates.parquet").set_index("test")
    # docs/methods.md §2: W3 whitened d = 0.27 with WikiText-2 word types as the reference sample;
    # W10 with `Billy` has d = 0.99 raw.
    assert abs(table.loc["W3", "d_whitened"] - 0.27) < 0.02
    assert abs(table.loc["W10", "d_raw"] - 0.99) < 0.01
    assert set(table.loc[[f"W{i}" for i in range(1, 11)], "change"]) <= {
        "Stable",
        "Disappearing",
        "Emerging",
        "Not significant",
    }
    benchmarks = table.loc["similarity"].set_index("benchmark")
    assert set(benchmarks.index) == {"WS-353", "SimLex-999", "STS-B"}
    assert (benchmarks["rho_whitened"] > benchmarks["rho_raw"]).all()  # whitening helps GloVe-50d here
    stats, metadata = load_zca(run / "zca.npz")
    assert stats.W.shape == (50, 50) and "WikiText-2" in metadata["reference"]
    spectrum = pd.read_parquet(run / "explained_variance.parquet")
    np.testing.assert_allclose(spectrum["explained_variance_raw"].sum(), 1.0, rtol=1e-4)
    for name in ("cosine_matrices.png", "weat_heatmap.png", "weat_raw_vs_whitened.png"):
        assert (run / name).stat().st_size > 0


def _sc_weat_exact_p(w, a, b):
    """SC-WEAT's two-sided p (the default: 2 x the smaller one-sided p, the observed partition counted) by
    enumerating every re-partition of A ∪ B (float64 NumPy)."""
    import itertools

    c = np.concatenate([a, b]) @ w / (np.linalg.norm(np.concatenate([a, b]), axis=1) * np.linalg.norm(w))
    observed = c[: len(a)].mean() - c[len(a) :].mean()
    null = [c[list(i)].mean() - np.delete(c, list(i)).mean() for i in itertools.combinations(range(len(c)), len(a))]
    greater, less = np.mean(np.array(null) >= observed - 1e-9), np.mean(np.array(null) <= observed + 1e-9)
    return float(min(1.0, 2 * min(greater, less)))


def test_sc_weat_job_on_glove_inline_words_matches_numpy_exact_p(tmp_path, cli):
    from jaxassoc.embeddings.static import load_embedded_glove

    sets = {
        "X": ["doctor", "engineer"],
        "Y": ["nurse", "teacher"],
        "A": ["he", "man", "his", "him"],
        "B": ["she", "woman", "her", "hers"],
    }
    proc = cli(
        "jaxassoc",
        "metric=weat",
        "model=glove-6b-50d",
        "metric.single_category=true",
        "dataset=custom_weat",
        *(f"dataset.{s}=[{','.join(w)}]" for s, w in sets.items()),
        "hydra.run.dir=run",
        "cache_dir=null",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = pd.read_parquet(tmp_path / "run" / "aggregates.parquet").set_index("word")
    assert list(table.index) == [*sets["X"], *sets["Y"]] and table["p_exact"].all()
    glove = load_embedded_glove()
    a, b = (glove.lookup(sets[s]).vectors.astype(np.float64) for s in "AB")
    for word in table.index:
        w = glove.lookup([word]).vectors[0].astype(np.float64)
        assert table.loc[word, "p"] == pytest.approx(_sc_weat_exact_p(w, a, b), abs=1e-6), word
    assert table.loc["nurse", "d"] < 0 < table.loc["engineer", "d"]  # GloVe's gendered occupations
