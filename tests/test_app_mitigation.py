"""The ``intervention`` group's mitigation methods in the app (docs/methods.md §11): an eraser fitted once per
model and site, bound in every pass, with the LM cost beside the metric; Self-Debias where a metric scores
tokens; Hard Debias and erasers on static vectors; and the inputs they cannot take refused by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from family_specs import TINY

from jaxassoc.app.config import InterventionConfig
from jaxassoc.app.interventions import LM_COST_COLUMNS, debiased_vectors
from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.errors import ConfigError
from jaxassoc.mitigation import hard_debias

FIT = ["intervention.max_sentences=40", "intervention.lm_cost_tokens=300"]


def _model(tiny_checkpoint):
    return ["model.name=tiny", f"model.source={tiny_checkpoint(TINY['gpt2'], n_positions=512)}"]


def _jobs(folder):
    return {
        pd.read_parquet(p.parent / "aggregates.parquet")["prov_intervention"].iloc[0]: (
            pd.read_parquet(p),
            pd.read_parquet(p.parent / "aggregates.parquet"),
        )
        for p in folder.glob("*/items.parquet")
    }


def test_a_sweep_with_and_without_an_eraser_scores_the_same_pairs_with_the_lm_cost(tmp_path, tiny_checkpoint, cli):
    sweep = cli("jaxassoc", "-m", "metric=crows_pairs", "dataset.sample=12", *_model(tiny_checkpoint),
                "intervention=none,leace", "intervention.site=layers.1.resid_post", *FIT, "hydra.sweep.dir=sweep",
                cwd=tmp_path)  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    jobs = _jobs(tmp_path / "sweep")
    (none_items, none_agg), (leace_items, leace_agg) = jobs["none"], jobs["leace"]
    assert list(none_items["sent_more"]) == list(leace_items["sent_more"])
    assert np.abs(none_items["sent_more_score"] - leace_items["sent_more_score"]).max() > 1e-4  # the eraser acted
    assert set(LM_COST_COLUMNS) <= set(leace_agg) and not set(LM_COST_COLUMNS) & set(none_agg)
    row = leace_agg.iloc[0]
    assert row["lm_cost_kind"] == "perplexity" and row["lm_cost_tokens"] >= 300
    assert row["lm_ppl"] != row["lm_ppl_none"] and np.isfinite(row["lm_ppl"])
    assert row["prov_intervention_label"] == "leace gender @ layers.1.resid_post"
    again = cli("jaxassoc", "metric=crows_pairs", "dataset.sample=12", *_model(tiny_checkpoint), "intervention=leace",
                "intervention.site=layers.1.resid_post", *FIT, "hydra.run.dir=again", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0 and "cache hit: eraser" in again.stdout + again.stderr  # fitted once
    repeat = pd.read_parquet(tmp_path / "again" / "items.parquet")
    np.testing.assert_array_equal(repeat["sent_more_score"], leace_items["sent_more_score"])


@pytest.mark.slow  # three CLI jobs on a tiny GPT-2 (issue 38: the default suite's budget)
def test_self_debias_changes_a_token_scoring_metric_and_is_refused_elsewhere(tmp_path, tiny_checkpoint, cli):
    model = _model(tiny_checkpoint)
    plain = cli("jaxassoc", "metric=crows_pairs", "dataset.sample=8", *model, "hydra.run.dir=plain", cwd=tmp_path)
    debiased = cli("jaxassoc", "metric=crows_pairs", "dataset.sample=8", *model, "intervention=self_debias",
                   "intervention.lm_cost_tokens=200", "hydra.run.dir=sd", cwd=tmp_path)  # fmt: skip
    assert plain.returncode == 0 and debiased.returncode == 0, debiased.stderr[-3000:]
    a, b = (pd.read_parquet(tmp_path / d / "items.parquet") for d in ("plain", "sd"))
    assert np.abs(a["sent_more_score"] - b["sent_more_score"]).max() > 1e-4
    assert pd.read_parquet(tmp_path / "sd" / "aggregates.parquet")["lm_ppl"].notna().all()
    rpam = cli("jaxassoc", "metric=rpam", *model, "intervention=self_debias", "hydra.run.dir=r", cwd=tmp_path)
    assert rpam.returncode != 0 and "metric=rpam scores none that way" in rpam.stderr


def test_interventions_the_model_or_options_cannot_take_are_refused(tmp_path, tiny_checkpoint, cli):
    model = _model(tiny_checkpoint)
    cases = {
        ("intervention=hard_debias",): "transforms static word vectors",
        ("intervention=leace", "intervention.site=layers.0.attn.q"): "an eraser acts on (B, T, D) states",
        ("intervention=leace", "intervention.site=layers.9.resid_post"): "layer 9 is out of range",
        ("intervention=leace", "intervention.bias_type=caste"): "intervention.bias_type='caste'",
        ("intervention=self_debias", "intervention.bias_type=words.json"): "not a word-list file",
        ("intervention=inlp", "intervention.corpus=missing.txt"): "missing.txt",
        ("intervention=self_debias", "intervention.epsilon=0"): "intervention.epsilon=0",
    }
    (tmp_path / "words.json").write_text('{"classes": ["a", "b"], "tuples": [["x", "y"]]}')
    for overrides, message in cases.items():
        proc = cli("jaxassoc", "metric=crows_pairs", "dataset.sample=4", *model, *overrides, "hydra.run.dir=o",
                   cwd=tmp_path)  # fmt: skip
        assert proc.returncode != 0 and message in proc.stderr, (overrides, proc.stderr[-800:])
    static = cli("jaxassoc", "metric=weat", "model=glove-6b-50d", "intervention=ablate", "intervention.heads=[[0,1]]", "hydra.run.dir=s",
                 cwd=tmp_path)  # fmt: skip
    assert static.returncode != 0 and "use intervention=hard_debias" in static.stderr


def _gendered_table() -> StaticEmbeddings:
    """Seeded vectors with a gender direction for debiaswe's definitional words and a few others."""
    rng = np.random.default_rng(0)
    pairs = [("she", "he"), ("her", "his"), ("woman", "man"), ("mary", "john"), ("herself", "himself"),
             ("daughter", "son"), ("mother", "father"), ("gal", "guy"), ("girl", "boy"), ("female", "male"),
             ("queen", "king"), ("wife", "husband"), ("sister", "brother"), ("women", "men")]  # fmt: skip
    g = rng.normal(size=16)
    words, rows = [], []
    for f, m in pairs:
        base = rng.normal(size=16)
        words += [f, m]
        rows += [base + g, base - g]
    for w in ("nurse", "engineer", "doctor", "teacher", "table", "river"):
        words.append(w)
        rows.append(rng.normal(size=16) + rng.normal() * g)
    return StaticEmbeddings(words, np.asarray(rows, np.float32), lowercase=True, source="test table")


def test_hard_debias_and_erasers_transform_a_static_table():
    table = _gendered_table()
    done = debiased_vectors(table, InterventionConfig(name="hard_debias"))
    np.testing.assert_array_equal(done.matrix, hard_debias(table).table.matrix)
    with pytest.raises(ConfigError, match="bias_type"):
        InterventionConfig(name="hard_debias", bias_type="words.json")
    erased = debiased_vectors(table, InterventionConfig(name="leace"))
    rows = {w: erased.matrix[erased.index[w]] for w in erased.words}
    from jaxassoc.data import load_attribute_words

    tuples = [t for t in load_attribute_words("gender").tuples if all(w in table for w in t)]
    males, females = (np.mean([rows[t[c]] for t in tuples], axis=0) for c in (0, 1))
    before = [np.mean([table.matrix[table.index[t[c]]] for t in tuples], axis=0) for c in (0, 1)]
    assert np.abs(males - females).max() <= 1e-4 * np.abs(table.matrix).max()  # the class means made equal
    assert np.abs(before[0] - before[1]).max() > 0.5
    assert debiased_vectors(table, InterventionConfig()) is table


@pytest.mark.slow  # three CLI jobs (issue 38: the default suite's budget)
def test_self_debias_on_stereoset_needs_the_start_token_scoring(tmp_path, tiny_checkpoint, cli):
    import json

    from test_stereoset import DOCUMENT

    (tmp_path / "dev.json").write_text(json.dumps(DOCUMENT))
    common = ["metric=stereoset", *_model(tiny_checkpoint), "dataset.path=dev.json", "intervention.lm_cost_tokens=0"]
    authors = cli("jaxassoc", *common, "intervention=self_debias", "hydra.run.dir=a", cwd=tmp_path)
    assert authors.returncode != 0 and "needs metric.causal_scoring=start" in authors.stderr
    runs = {
        name: cli(
            "jaxassoc",
            *common,
            "metric.causal_scoring=start",
            f"intervention={name}",
            f"hydra.run.dir={name}",
            cwd=tmp_path,
        )  # fmt: skip
        for name in ("none", "self_debias")
    }
    assert all(r.returncode == 0 for r in runs.values()), runs["self_debias"].stderr[-2000:]
    plain, debiased = (pd.read_parquet(tmp_path / n / "items.parquet") for n in runs)
    assert list(plain["sentence"]) == list(debiased["sentence"])
    assert np.abs(plain["score"] - debiased["score"]).max() > 1e-6


@pytest.mark.slow  # three CLI jobs on the embedded GloVe (issue 38: the default suite's budget)
def test_weat_on_static_vectors_scores_the_debiased_table(tmp_path, cli):
    """``metric=weat`` reads the table the intervention made (it once read the loaded one)."""
    words = ["dataset=custom_weat", "dataset.X=[math,algebra,geometry,calculus]", "dataset.Y=[poetry,art,dance,literature]",
             "dataset.A=[male,man,boy,brother,he,him,his,son]", "dataset.B=[female,woman,girl,sister,she,her,hers,daughter]"]  # fmt: skip
    d = {}
    for name in ("none", "hard_debias", "leace"):
        proc = cli("jaxassoc", "metric=weat", "model=glove-6b-50d", *words, f"intervention={name}",
                   f"hydra.run.dir={name}", cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        d[name] = float(pd.read_parquet(tmp_path / name / "aggregates.parquet")["d_raw"].iloc[0])
    assert abs(d["hard_debias"] - d["none"]) > 0.1 and abs(d["leace"] - d["none"]) > 0.1, d


def test_the_default_site_is_what_the_metrics_read(tiny_checkpoint):
    """``intervention.site=output``: a causal LM's ``final_norm``; a masked LM's or encoder's last block output, which
    its sentence vectors read (an eraser at ``final_norm`` of an encoder changed no SEAT number)."""
    from jaxassoc.embeddings.sentence import sentence_vectors
    from jaxassoc.mitigation import bound, fit_leace
    from jaxassoc.mitigation.site_fit import resolve_site
    from jaxassoc.models import load_model
    from jaxassoc.models.interventions import layer_count

    gpt2, bert = load_model(tiny_checkpoint(TINY["gpt2"])), load_model(tiny_checkpoint("bert"))
    assert resolve_site(gpt2, "output") == "final_norm" and resolve_site(gpt2, "layers.0.mlp.in") == "layers.0.mlp.in"
    last = f"layers.{layer_count(bert.params['body']) - 1}.resid_post"
    assert resolve_site(bert, "output") == last
    rng = np.random.default_rng(0)
    width = bert.head.W.shape[1]
    eraser = fit_leace((rng.normal(size=(200, width)) + np.outer(rng.integers(0, 2, 200), np.ones(width))).astype(
        np.float32), rng.integers(0, 2, 200))  # fmt: skip
    erased = bound(bert, "output", eraser)
    assert set(erased.edits) == {last}
    texts = ["a b c", "b c d e"]
    before, after = sentence_vectors(bert, texts), sentence_vectors(erased, texts)
    assert np.abs(before - after).max() > 1e-3
