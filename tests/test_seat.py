"""SEAT (docs/methods.md §8): the templates fill as documented, d equals a NumPy WEAT on the same sentence
vectors, the pooled sentence vector equals transformers' on tiny random checkpoints, and words the encoder
cannot represent or empty sets are refused by name."""

import family_specs
import jax
import numpy as np
import pytest
import torch
from tolerances import f32_association, f32_chain, f32_effect_size, f32_sum

from jaxassoc import data
from jaxassoc.data import WeatSuite, WeatTest, load_seat_templates, load_weat_suite
from jaxassoc.embeddings.sentence import sentence_vectors
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.models import load_model
from jaxassoc.readouts.seat import check_encodable, seat_suite
from jaxassoc.stats import StatsOptions
from jaxassoc.suites.seat import run_seat_experiment


def _suite(x=("rose", "tulip", "daisy"), y=("ant", "moth", "wasp"), a=("love", "happy"), b=("war", "ugly")):
    test = WeatTest("T1", "flowers/insects", x, y, a, b, "Flowers", "Insects", "Pleasant", "Unpleasant")
    return WeatSuite("tiny", (test,), "test")


def test_templates_fill_as_documented():
    t = load_seat_templates()
    assert t.sentences("aster")[0] == "This is an aster." and t.sentences("rose")[0] == "This is a rose."
    assert t.form_of("Adam") == "name" and "Adam is here." in t.sentences("Adam")
    assert t.form_of("happy") == "adjective" and "They are happy." in t.sentences("happy")
    assert t.form_of("children") == "plural" and "These are children." in t.sentences("children")
    assert t.form_of("kill") == "verb" and "This will kill." in t.sentences("kill")
    assert t.sentences("he")[0] == "He is here."  # the sentence starts with a capital, the word does not
    assert t.form_of("freedom") == "mass" and "This is freedom." in t.sentences("freedom")
    for word in ("aster", "Adam", "happy", "children", "kill", "he", "freedom"):
        filled = t.sentences(word)
        assert len(filled) == len(t.templates[t.form_of(word)]) >= 4 and len(set(filled)) == len(filled)
        assert all(word in s or word.capitalize() in s for s in filled)
    caliskan = {w for test in load_weat_suite("weat_caliskan2017").tests for s in _sets(test) for w in s}
    assert set(t.forms) <= caliskan  # every listed form belongs to a packaged word (no stale entry)
    # The sentence suite: each word once per template of its form, in word order.
    test = seat_suite(_suite(), t).tests[0]
    assert test.targets_x[:6] == t.sentences("rose") and len(test.targets_x) == 3 * len(t.templates["noun"])
    assert len(test.attributes_a) == len(t.templates["mass"]) + len(t.templates["adjective"])
    assert data.dataset_info("seat_templates").version == data.DATASETS["seat_templates"].version


def _sets(test):
    return (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)


def _unit(m):
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _numpy_weat_d(x, y, a, b):
    unit = _unit

    def s(w):
        return (unit(w) @ unit(a).T).mean(1) - (unit(w) @ unit(b).T).mean(1)

    sx, sy = s(x), s(y)
    return (sx.mean() - sy.mean()) / np.concatenate([sx, sy]).std(ddof=1), sx.sum() - sy.sum()


def test_seat_effect_size_equals_a_numpy_weat_on_the_same_sentence_vectors():
    templates, suite = load_seat_templates(), _suite()
    sentences = seat_suite(suite, templates).tests[0]
    rng = np.random.default_rng(0)
    vectors = {s: rng.normal(size=16).astype(np.float32) for sets in _sets(sentences) for s in sets}
    options = StatsOptions(n_permutations=2000, n_bootstrap=200)
    row = run_seat_experiment(suite, templates, vectors, key=jax.random.key(0), options=options).iloc[0]
    X, Y, A, B = (np.stack([vectors[s] for s in sets]).astype(np.float64) for sets in _sets(sentences))
    d, S = _numpy_weat_d(X, Y, A, B)
    # a float32 WEAT on 16-d vectors: associations within f32_association, S a sum of them (|s| ≤ 2), d by
    # f32_effect_size (ddof 1: the ddof-0 SD is the smaller, so the bound holds)
    s_tol = f32_association(X.shape[1], len(A), len(B))
    s = np.concatenate([(_unit(w) @ _unit(A).T).mean(1) - (_unit(w) @ _unit(B).T).mean(1) for w in (X, Y)])
    d_tol, n = f32_effect_size(s_tol, s, d), len(X) + len(Y)
    np.testing.assert_allclose([row["d"], row["effect_size"]], [d, d], rtol=0, atol=d_tol)
    np.testing.assert_allclose(row["S"], S, rtol=0, atol=n * s_tol + f32_sum(n, 2.0))
    assert abs(d) > 0.01  # random vectors: a nonzero d, so the comparison can fail
    assert (row["n_x"], row["n_a"], row["words_x"], row["words_a"]) == (18, 10, 3, 2)
    assert row["ci_low"] <= row["d"] <= row["ci_high"] and 0 < row["p_value"] <= 1


@pytest.fixture(scope="module")
def bert(tiny_checkpoint):
    folder = tiny_checkpoint("bert")
    return folder, load_model(str(folder))


SENTENCES = ["This is a rose.", "The doctor is here.", "They are happy."]


@pytest.mark.parametrize("pooling", ["first", "mean", "last"])
def test_pooled_sentence_vector_matches_transformers_on_a_tiny_bert(bert, pooling):
    folder, model = bert
    ours = sentence_vectors(model, SENTENCES, pooling=pooling, batch_size=2)
    reference = family_specs.load_torch("bert", folder)
    for text, vector in zip(SENTENCES, ours):
        enc = model.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            hidden = reference(**enc, output_hidden_states=True).hidden_states[-1][0]
        expected = {"first": hidden[0], "mean": hidden.mean(0), "last": hidden[-1]}[pooling]
        # float32 vs torch, tiny BERT (2 layers, inner 64): f32_chain scaled by the states, ~1e-5 (rtol=1e-4
        # with atol=1e-4 had been ~20x that)
        tol = f32_chain(2, 64, float(hidden.abs().max()))
        np.testing.assert_allclose(vector, expected.numpy(), rtol=0, atol=tol)
    assert not np.allclose(ours, sentence_vectors(model, SENTENCES, pooling="mean" if pooling != "mean" else "first"))


def test_last_token_of_a_tiny_causal_lm_matches_transformers(tiny_checkpoint):
    folder = tiny_checkpoint("gpt2")
    model = load_model(str(folder))
    ours = sentence_vectors(model, SENTENCES, pooling="last", batch_size=2)  # unequal lengths: padding inside
    reference = family_specs.load_torch("gpt2", folder)
    for text, vector in zip(SENTENCES, ours):
        with torch.no_grad():
            hidden = reference(**model.tokenizer(text, return_tensors="pt"), output_hidden_states=True)
        last = hidden.hidden_states[-1][0, -1].numpy()  # tiny GPT-2: 2 layers, inner 128 (see above)
        np.testing.assert_allclose(vector, last, rtol=0, atol=f32_chain(2, 128, float(np.abs(last).max())))


def test_a_word_the_encoder_cannot_represent_is_refused_naming_test_set_and_word(bert):
    _, model = bert
    check_encodable(_suite().tests, model.tokenizer)  # every character seen by the tiny tokenizer
    with pytest.raises(InputError, match=r"test T1: word set 'Unpleasant': .* 'war☃' .*unknown token '\[UNK\]'"):
        check_encodable(_suite(b=("ugly", "war☃")).tests, model.tokenizer)


def test_an_empty_set_and_an_unknown_pooling_are_refused_by_name():
    templates, suite = load_seat_templates(), _suite(y=())
    vectors = {s: np.ones(4, np.float32) for sets in _sets(seat_suite(suite, templates).tests[0]) for s in sets}
    with pytest.raises(InputError, match="'T1 Insects' is empty"):
        run_seat_experiment(suite, templates, vectors, key=jax.random.key(0))
    with pytest.raises(ConfigError, match="pooling 'cls'"):
        sentence_vectors(object(), ["x"], pooling="cls")


def test_clustered_effect_size_is_the_effect_size_of_the_items_its_masks_select():
    from jaxassoc.metrics.weat import clustered_effect_size, effect_size

    rng = np.random.default_rng(1)
    sizes_x, sizes_y = [3, 5, 4], [5, 2]  # words with different numbers of sentences
    s_x, s_y = (rng.normal(size=(len(sizes), 5)).astype(np.float32) for sizes in (sizes_x, sizes_y))
    m_x, m_y = ((np.arange(5) < np.array(sizes)[:, None]).astype(np.float32) for sizes in (sizes_x, sizes_y))
    for ddof in (0, 1):
        got = clustered_effect_size((s_x, m_x), (s_y, m_y), ddof=ddof)
        want = effect_size(s_x[m_x > 0], s_y[m_y > 0], ddof=ddof)
        # float32 sums over 21 items of O(1) values in two programs: the items are exact, so f32_effect_size
        # with the sums' own rounding only (rtol=1e-5 had been below it for |d| < 1)
        items = np.concatenate([s_x[m_x > 0], s_y[m_y > 0]])
        np.testing.assert_allclose(got, want, rtol=0, atol=f32_effect_size(0.0, items, float(want)))


def test_a_word_unit_ci_resamples_words_with_all_their_sentences_like_a_numpy_cluster_bootstrap():
    templates, suite = load_seat_templates(), _suite()
    sentences = seat_suite(suite, templates).tests[0]
    rng = np.random.default_rng(0)
    word_effect = {w: rng.normal(size=16) for w in (*suite.tests[0].targets_x, *suite.tests[0].targets_y)}
    vectors = {}
    for sets in _sets(sentences):
        for s in sets:
            vectors[s] = rng.normal(size=16).astype(np.float32)
    for w, shift in word_effect.items():  # a word's sentences share a component: they are not independent
        for s in templates.sentences(w):
            vectors[s] = (vectors[s] + 2 * shift).astype(np.float32)
    options = StatsOptions(n_permutations=200, n_bootstrap=4000, confidence=0.9)
    by_sentence, by_word = (
        run_seat_experiment(suite, templates, vectors, key=jax.random.key(0), options=options, unit=unit).iloc[0]
        for unit in ("sentence", "word")
    )
    assert by_word["d"] == by_sentence["d"] and by_word["ci_unit"] == "word" and by_sentence["ci_unit"] == "sentence"
    # NumPy: resample the target words within X and within Y, each bringing all its sentences; A, B fixed
    x, y, a, b = (np.stack([vectors[s] for s in sets]).astype(np.float64) for sets in _sets(sentences))
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    s_of = {s: (unit(vectors[s].astype(np.float64)) @ unit(a).T).mean() - (unit(vectors[s].astype(np.float64)) @ unit(b).T).mean()
            for s in (*_sets(sentences)[0], *_sets(sentences)[1])}  # fmt: skip
    clusters = [[[s_of[t] for t in templates.sentences(w)] for w in words]
                for words in (suite.tests[0].targets_x, suite.tests[0].targets_y)]  # fmt: skip
    draws = []
    for _ in range(20_000):
        picked = [[c[i] for i in rng.integers(0, len(c), len(c))] for c in clusters]
        sx, sy = (np.concatenate(p) for p in picked)
        draws.append((sx.mean() - sy.mean()) / np.concatenate([sx, sy]).std(ddof=1))
    low, high = np.quantile(draws, [0.05, 0.95])
    # percentile bounds from 4,000 resamples over 3 + 3 words: Monte Carlo SD a few % of the width; 15 % margin
    width = high - low
    assert by_word["ci_low"] == pytest.approx(low, abs=0.15 * width)
    assert by_word["ci_high"] == pytest.approx(high, abs=0.15 * width)
    # the word-level interval is the wider one when a word's sentences move together
    assert by_word["ci_high"] - by_word["ci_low"] > 1.5 * (by_sentence["ci_high"] - by_sentence["ci_low"])
