"""F1, precision, recall and precision at k against hand-counted references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxassoc.errors import InputError
from jaxassoc.stats import f1_score, precision, precision_at_k, recall


def reference_scores(y_true, y_pred):
    """Count the confusion table in plain Python; precision, recall, F1 as harmonic mean."""
    tp = sum(1 for t, p in zip(y_true, y_pred) if t == 1 and p == 1)
    fp = sum(1 for t, p in zip(y_true, y_pred) if t == 0 and p == 1)
    fn = sum(1 for t, p in zip(y_true, y_pred) if t == 1 and p == 0)
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


@pytest.mark.parametrize("seed", range(4))
def test_scores_match_hand_counts(seed):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 2, 57)
    y_pred = np.where(rng.random(57) < 0.7, y_true, 1 - y_true)
    prec, rec, f1 = reference_scores(y_true.tolist(), y_pred.tolist())
    # float32 quotients of exact counts (F1: two of them and one more division): a few u, abs=1e-6
    assert float(precision(y_true, y_pred)) == pytest.approx(prec, abs=1e-6)
    assert float(recall(y_true, y_pred)) == pytest.approx(rec, abs=1e-6)
    assert float(f1_score(y_true, y_pred)) == pytest.approx(f1, abs=1e-6)
    # bool labels give the same
    assert float(f1_score(y_true == 1, y_pred == 1)) == pytest.approx(f1, abs=1e-6)


def test_zero_denominators():
    zeros = np.zeros(5, int)
    ones = np.ones(5, int)
    assert float(precision(ones, zeros)) == 0.0  # nothing predicted positive
    assert float(recall(zeros, ones)) == 0.0  # no positives
    assert float(f1_score(zeros, zeros)) == 0.0
    assert np.isnan(float(f1_score(zeros, zeros, zero_division=np.nan)))
    assert float(f1_score(ones, ones)) == 1.0


def test_runs_under_jit_and_vmap():
    rng = np.random.default_rng(5)
    y_true = rng.integers(0, 2, (3, 20))
    y_pred = rng.integers(0, 2, (3, 20))
    got = jax.jit(jax.vmap(f1_score))(jnp.asarray(y_true), jnp.asarray(y_pred))
    ref = [reference_scores(t.tolist(), p.tolist())[2] for t, p in zip(y_true, y_pred)]
    np.testing.assert_allclose(np.asarray(got), ref, atol=1e-6)  # float32 quotients of exact counts


def test_precision_at_k():
    scores = np.array([0.9, 0.1, 0.8, 0.4, 0.7, 0.3])
    relevant = np.array([1, 0, 0, 1, 1, 0], bool)
    assert float(precision_at_k(scores, relevant, 1)) == 1.0
    assert float(precision_at_k(scores, relevant, 3)) == pytest.approx(2 / 3)  # 0.9, 0.8, 0.7
    assert float(precision_at_k(scores, relevant, 2, largest=False)) == 0.0  # 0.1, 0.3
    assert float(precision_at_k(scores, relevant, 6)) == 0.5
    rng = np.random.default_rng(6)
    s, r = rng.normal(size=100), rng.random(100) < 0.3
    for k in (5, 17, 60):
        top = np.argsort(-s)[:k]
        assert float(precision_at_k(s, r, k)) == pytest.approx(r[top].mean(), abs=1e-6)  # count / k in float32


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(InputError, match="same shape"):
        f1_score(np.ones(3), np.ones(4))
    with pytest.raises(InputError, match=r"binary labels 0/1.*\[2\]"):
        precision(np.array([0, 1, 2]), np.array([0, 1, 1]))
    with pytest.raises(InputError, match="empty"):
        recall(np.array([]), np.array([]))
    with pytest.raises(InputError, match="k must be"):
        precision_at_k(np.ones(4), np.ones(4, bool), 5)
    with pytest.raises(InputError, match="NaN"):
        precision_at_k(np.array([1.0, np.nan]), np.ones(2, bool), 1)
