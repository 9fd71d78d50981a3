"""Contextual word vectors and the contextual ZCA reference through the on-disk cache: a hit is
bit-identical to a recomputation and runs no forward pass; another layer, context setting, corpus or
reference level misses. The WEAT job reuses them across a sweep of statistics options."""

import dataclasses
import logging

import family_specs
import numpy as np
import pytest

from jaxassoc.app import model_loading
from jaxassoc.app.config import DatasetConfig, ModelConfig, StatsConfig, TemplateConfig, WhiteningConfig
from jaxassoc.app.spec import Job
from jaxassoc.app.tasks import weat as weat_job
from jaxassoc.embeddings import contextual
from jaxassoc.embeddings.contextual import ContextIndex, ContextualWordVectors
from jaxassoc.models import load_model
from jaxassoc.readouts.vectors import cached_reference, cached_sentence_vectors, prefetch_word_vectors

SENTENCES = list(dict.fromkeys(family_specs.CORPUS))
WORDS = ["doctor", "nurse", "music", "science", "zebra"]  # zebra: no context, falls back or is dropped


@pytest.fixture(scope="module")
def folder(tiny_checkpoint):
    return tiny_checkpoint("bert-encoder")


@pytest.fixture(scope="module")
def model(folder):
    return load_model(folder)


@pytest.fixture
def calls(monkeypatch):
    """Counts the batched forward runs (token_states) behind word vectors and reference states."""
    counted = []
    states = contextual.token_states
    monkeypatch.setattr(contextual, "token_states", lambda *a, **k: counted.append("forward") or states(*a, **k))
    return counted


def _vectors(model, sentences=SENTENCES, **options):
    settings = dict(layer=-1, max_contexts=3, seed=0, fallback="word", batch_size=4) | options
    return ContextualWordVectors(model, ContextIndex.build(sentences), **settings)


def test_word_vector_hit_is_bit_identical_and_runs_no_forward_pass(model, tmp_path, calls):
    first = _vectors(model)
    assert prefetch_word_vectors(first, WORDS, cache_dir=tmp_path, chunk_words=2) == len(WORDS)
    assert calls == ["forward"] * 3
    hit = _vectors(model)
    prefetch_word_vectors(hit, WORDS, cache_dir=tmp_path, chunk_words=2)
    assert calls == ["forward"] * 3
    fresh = _vectors(model)
    prefetch_word_vectors(fresh, WORDS, cache_dir=None, chunk_words=2)
    for word in WORDS:
        (a, how_a), (b, how_b), (c, how_c) = first.cache[word], hit.cache[word], fresh.cache[word]
        assert a.dtype == b.dtype == c.dtype and np.array_equal(a, b) and np.array_equal(a, c)
        assert how_a == how_b == how_c
    assert hit.coverage()["zebra"] == "no context: fallback word" and hit.coverage()["doctor"] == "1 contexts"
    assert np.array_equal(hit(WORDS).vectors, first(WORDS).vectors)


@pytest.mark.parametrize(
    "change",
    [{"layer": 1}, {"max_contexts": 2}, {"seed": 1}, {"fallback": "drop"}, {"sentences": SENTENCES[:-1]}],
    ids=str,
)
def test_changed_setting_misses(model, tmp_path, calls, change):
    prefetch_word_vectors(_vectors(model), WORDS, cache_dir=tmp_path)
    assert len(calls) == 1
    changed = _vectors(model, **change)
    prefetch_word_vectors(changed, WORDS, cache_dir=tmp_path)
    assert len(calls) == 2


def test_dropped_words_survive_the_cache(model, tmp_path, calls):
    prefetch_word_vectors(_vectors(model, fallback="drop"), WORDS, cache_dir=tmp_path)
    hit = _vectors(model, fallback="drop")
    prefetch_word_vectors(hit, WORDS, cache_dir=tmp_path)
    assert len(calls) == 1
    assert hit.cache["zebra"] == (None, "no context: dropped")
    assert hit(WORDS).lost_words == ["music", "science", "zebra"]  # no whole-token context (only "music,")


def test_reference_hit_is_bit_identical_and_level_misses(model, tmp_path, calls):
    options = dict(layer=-1, max_items=50, seed=0, batch_size=4)
    first = cached_reference(model, SENTENCES, cache_dir=tmp_path, level="token", **options)
    hit = cached_reference(model, SENTENCES, cache_dir=tmp_path, level="token", **options)
    assert calls == ["forward"]
    fresh = contextual.contextual_reference(model, SENTENCES, level="token", **options)
    assert calls == ["forward"] * 2
    for got in (hit, fresh):
        assert got.vectors.dtype == first.vectors.dtype and np.array_equal(got.vectors, first.vectors)
        assert list(got.words) == list(first.words) and got.description == first.description
    cached_reference(model, SENTENCES, cache_dir=tmp_path, level="sentence", **options)
    cached_reference(model, SENTENCES, cache_dir=tmp_path, level="token", **{**options, "layer": 1})
    assert calls == ["forward"] * 4


def _job(folder, tmp_path, n_permutations):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES), encoding="utf-8")
    return Job(
        model=ModelConfig(name="tiny", source=str(folder), kind="encoder", batch_size=8),
        metric=weat_job.WeatMetricConfig(
            name="weat", corpus=str(corpus), similarity=False, anisotropy=False, max_contexts=3
        ),
        dataset=DatasetConfig(name="weat_caliskan2017"),
        template=TemplateConfig(),
        whitening=WhiteningConfig(name="zca", max_samples=200),
        stats=StatsConfig(n_permutations=n_permutations, n_bootstrap=50, exact_bound=0),
        seed=0,
        output_dir=tmp_path / f"out{n_permutations}",
        quiet=True,
        cache_dir=tmp_path / "cache",
    )


@pytest.mark.slow  # a 4-job sweep on a tiny LM: ~16 s (issue 38: the default suite's budget)
def test_weat_job_sweep_over_statistics_reuses_vectors(folder, tmp_path, calls, caplog):
    caplog.set_level(logging.INFO, logger="jaxassoc")
    first = weat_job.run(_job(folder, tmp_path, 100))
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("weat: ") and "word vectors extracted in" in line for line in lines)
    assert any(line.startswith("weat: whitening fitted on ") for line in lines)
    n_calls = len(calls)
    assert n_calls >= 2
    second = weat_job.run(_job(folder, tmp_path, 200))
    assert len(calls) == n_calls  # vectors and reference both from the cache
    np.testing.assert_array_equal(first.items["d_raw"], second.items["d_raw"])
    np.testing.assert_array_equal(first.items["d_whitened"], second.items["d_whitened"])
    model_loading._load_language_model.cache_clear()


def test_sentence_vectors_hit_is_bit_identical_and_layer_pooling_misses(model, tmp_path, monkeypatch):
    from jaxassoc.embeddings.sentence import sentence_vectors
    from jaxassoc.readouts import vectors as vectors_readout

    counted = []
    monkeypatch.setattr(
        vectors_readout, "sentence_vectors", lambda *a, **k: counted.append(1) or sentence_vectors(*a, **k)
    )

    def cached(sentences, layer=-1, pooling="mean"):
        return cached_sentence_vectors(model, sentences, cache_dir=tmp_path, layer=layer, pooling=pooling, batch_size=4)

    first = cached(SENTENCES)
    hit = cached(SENTENCES)
    assert len(counted) == 1
    fresh = sentence_vectors(model, SENTENCES, layer=-1, batch_size=4)
    assert hit.dtype == first.dtype == fresh.dtype
    assert np.array_equal(hit, first) and np.array_equal(fresh, first)
    cached(SENTENCES, layer=1)
    cached(SENTENCES[:-1])
    assert not np.array_equal(cached(SENTENCES, pooling="first"), first)
    assert len(counted) == 4


@pytest.mark.parametrize(("kind", "refused"), [("bert-encoder", True), ("gpt2", False)])
def test_spellings_an_uncased_tokenizer_merges_are_one_word_to_contextual_weat(
    tiny_checkpoint, tmp_path, kind, refused
):
    from jaxassoc.app.config import CustomWeatConfig
    from jaxassoc.errors import InputError

    job = _job(tiny_checkpoint(kind), tmp_path, 100)
    sets = {
        "X": ["doctor", "Doctor", "nurse"],
        "Y": ["music", "science", "zebra"],
        "A": ["he", "man"],
        "B": ["she", "woman"],
    }
    job = dataclasses.replace(
        job,
        model=dataclasses.replace(job.model, kind="encoder" if kind == "bert-encoder" else "causal"),
        dataset=CustomWeatConfig(name="custom_weat", **sets),
        whitening=WhiteningConfig(),
    )
    if refused:  # the uncased WordPiece tokenizer reads Doctor as doctor: one word counted twice
        with pytest.raises(InputError, match=r"repeats \['Doctor', 'doctor'\] \(one word to the lookup: 'doctor'\)"):
            weat_job.run(job)
    else:  # byte-level BPE keeps case: two words
        assert len(weat_job.run(job).aggregates) == 1
    model_loading._load_language_model.cache_clear()
