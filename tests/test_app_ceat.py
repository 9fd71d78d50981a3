"""metric=ceat: per-word context pools vs transformers, the CLI on a tiny GPT-2 (tables, determinism, the
pool cache), the random-effects numbers vs a NumPy/scipy recomputation from the stored draws, fallbacks."""

import family_specs
import jax
import numpy as np
import pandas as pd
import pytest
import scipy.stats
import torch

from jaxassoc.data import WeatTest, load_weat_suite
from jaxassoc.embeddings.contextual import ContextIndex
from jaxassoc.errors import InputError
from jaxassoc.models import load_model
from jaxassoc.readouts.ceat import ContextPools, context_pools
from jaxassoc.suites.ceat import run_ceat_suite

CORPUS = [
    "The rose in the garden smells sweet and looks pleasant to everyone .",
    "A tulip is a flower that grows in the spring in many gardens .",
    "The ant carried a crumb of bread across the kitchen floor .",
    "There was a cockroach near the sink and it looked unpleasant .",
    "Freedom and love are words that many people find pleasant .",
    "The war caused much agony and death for the people of the town .",
    "A daisy and a lily grew next to the rose in the old garden .",
    "The spider built a web in the corner of the dark room .",
    "She gave him a rose and a daisy for his birthday party .",
    "The ant and the spider lived together under the old rock .",
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_checkpoint):
    corpus = tmp_path_factory.mktemp("ceat") / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n")
    return tiny_checkpoint("gpt2", n_positions=128), corpus


def test_context_pools_match_transformers_mean_pooled_word_tokens(tiny):
    folder, _ = tiny
    model = load_model(str(folder))
    index = ContextIndex.build(CORPUS)
    pools = context_pools(model, index, ["rose", "ant", "zebra"], layer=-1, max_contexts=5, batch_size=4)
    assert pools.how == ["3 corpus contexts", "2 corpus contexts", "no context: fallback word"]
    assert pools.counts.tolist() == [3, 2, 1]
    reference = family_specs.load_torch("gpt2", folder)
    tok = model.tokenizer
    for word in ("rose", "ant", "zebra"):
        texts = index.contexts(word, max_contexts=5, seed=0) or [word]
        expected = []
        for text in texts:
            start = text.split(" ").index(word)
            lo = len(" ".join(text.split(" ")[:start])) + (1 if start else 0)
            enc = tok(text, return_offsets_mapping=True)
            keep = [i for i, (a, b) in enumerate(enc["offset_mapping"]) if b > a and a < lo + len(word) and b > lo]
            with torch.no_grad():
                hidden = reference(torch.tensor([enc["input_ids"]]), output_hidden_states=True).hidden_states[-1][0]
            expected.append(hidden[keep].mean(0).numpy())
        np.testing.assert_allclose(pools.of(word), np.stack(expected), rtol=1e-4, atol=1e-4)


def _numpy_random_effects(es, v):
    """DerSimonian–Laird from scratch (docs/methods.md §3)."""
    w = 1 / v
    fixed = (w * es).sum() / w.sum()
    q = (w * (es - fixed) ** 2).sum()
    tau2 = max(0.0, (q - (len(es) - 1)) / (w.sum() - (w**2).sum() / w.sum()))
    ws = 1 / (v + tau2)
    ces, var = (ws * es).sum() / ws.sum(), 1 / ws.sum()
    return ces, var, tau2, 2 * scipy.stats.norm.sf(abs(ces) / np.sqrt(var))  # two-sided, the default


def _jaxassoc(cli, cwd, *overrides, check=True):
    proc = cli("jaxassoc", "metric=ceat", "model.name=tiny", *overrides, cwd=cwd, env={"HYDRA_FULL_ERROR": "0"})
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow  # two CEAT jobs: ~6 s (issue 38: the default suite's budget)
def test_ceat_cli_tables_and_pool_cache_hit_is_bit_identical(tmp_path, tiny, cli):
    folder, corpus = tiny
    common = [
        f"model.source={folder}",
        "metric.tests=[W1,W2]",
        f"metric.corpus={corpus}",
        "metric.max_contexts=4",
        f"cache_dir={tmp_path / 'cache'}",
    ]
    first = _jaxassoc(cli, tmp_path, *common, "metric.n_draws=300", "hydra.run.dir=a")
    other = _jaxassoc(cli, tmp_path, *common, "metric.n_draws=500", "seed=1", "hydra.run.dir=c")
    assert "cache hit: ceat_contexts" not in first.stderr + first.stdout
    assert "cache hit: ceat_contexts" in other.stderr + other.stdout  # another seed and N reuse the pools
    stored = list((tmp_path / "cache" / "ceat_contexts").glob("*.npz"))
    assert len(stored) == 1

    tables = {
        run: {stem: pd.read_parquet(tmp_path / run / f"{stem}.parquet") for stem in ("aggregates", "items", "draws")}
        for run in "ac"
    }
    # Rerunning run a from the cached pools (what a cache hit does) reproduces it bit for bit.
    with np.load(stored[0]) as npz:
        pools = ContextPools.from_arrays({k: npz[k] for k in npz.files})
    suite = load_weat_suite("weat_caliskan2017")
    again, draws = run_ceat_suite(
        pools, [suite.test("W1"), suite.test("W2")], [0, 1], key=jax.random.key(0), n_draws=300
    )
    a = tables["a"]["aggregates"]
    pd.testing.assert_frame_equal(a[list(again.columns)], again, check_exact=True)
    pd.testing.assert_frame_equal(tables["a"]["draws"], draws, check_exact=True)

    agg = a.set_index("test")
    assert list(agg.index) == ["W1", "W2"] and (agg["n_draws"] == 300).all()
    assert (agg[["n_x", "n_y", "n_a", "n_b"]] == 25).all().all() and agg["lost_words"].eq("").all()
    items = tables["a"]["items"]
    assert set(items["set"]) == {"X", "Y", "A", "B"}
    assert items.loc[items["word"] == "rose", "how"].iloc[0] == "3 corpus contexts"
    assert items.loc[items["word"] == "aster", "how"].iloc[0] == "no context: fallback word"
    assert (items["prov_model_weights_sha256"] != "").all()
    for run, n in (("a", 300), ("c", 500)):
        draws, agg = tables[run]["draws"], tables[run]["aggregates"].set_index("test")
        for test, d in draws.groupby("test"):
            assert len(d) == n
            ces, var, tau2, p = _numpy_random_effects(
                d["effect_size"].to_numpy(np.float64), d["variance"].to_numpy(np.float64)
            )
            np.testing.assert_allclose(
                agg.loc[test, ["ces", "ces_variance", "tau_squared"]].to_numpy(float),
                [ces, var, tau2],
                rtol=2e-3,
                atol=1e-9,
            )
            np.testing.assert_allclose(agg.loc[test, "p_value"], p, rtol=2e-2, atol=1e-6)
            np.testing.assert_allclose(agg.loc[test, "draw_es_mean"], d["effect_size"].mean(), rtol=1e-5)
    assert not np.array_equal(tables["a"]["draws"]["effect_size"][:300], tables["c"]["draws"]["effect_size"][:300])


def test_ceat_cli_refuses_an_unknown_test_and_a_static_model(tmp_path, tiny, cli):
    folder, corpus = tiny
    bad = _jaxassoc(
        cli,
        tmp_path,
        f"model.source={folder}",
        "metric.tests=[W42]",
        f"metric.corpus={corpus}",
        "cache_dir=null",
        check=False,
    )
    assert bad.returncode != 0 and "W42" in bad.stderr and "Traceback" not in bad.stderr
    static = cli("jaxassoc", "metric=ceat", "model=glove-6b-50d", cwd=tmp_path)
    assert static.returncode != 0 and "static" in static.stderr


def test_fallback_drop_refuses_a_set_that_loses_too_many_words():
    dim = 3
    rng = np.random.default_rng(0)
    words = ["a1", "a2", "b1", "b2", "x1", "x2", "y1", "y2"]
    counts = np.array([2, 0, 2, 2, 1, 3, 2, 2], np.int32)
    pools = ContextPools(
        words, rng.normal(size=(int(counts.sum()), dim)).astype(np.float32), counts, ["n"] * len(words)
    )
    test = WeatTest("T", "t", ("x1", "x2"), ("y1", "y2"), ("a1", "a2"), ("b1", "b2"), "X", "Y", "A", "B")
    with pytest.raises(InputError, match="a2"):
        run_ceat_suite(pools, [test], [0], key=jax.random.key(0), n_draws=10, max_oov_share=0.2)
    table, draws = run_ceat_suite(pools, [test], [0], key=jax.random.key(0), n_draws=10, max_oov_share=0.5)
    assert table.loc[0, "lost_words"] == "a2" and table.loc[0, "n_a"] == 1 and len(draws) == 10
