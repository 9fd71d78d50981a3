"""Hard Debias (Bolukbasi et al. 2016) on static vectors: agreement with WEFE's HardDebias on the embedded
GloVe 6B 50d vectors (tests/fixtures/hard_debias/, made by scripts/reference/wefe_hard_debias.py) and the
method's properties."""

from pathlib import Path

import numpy as np
import pytest

from jaxassoc.data.debiaswe import load_debiaswe_lists
from jaxassoc.embeddings import StaticEmbeddings, load_embedded_glove
from jaxassoc.errors import DataError
from jaxassoc.mitigation.hard_debias import equalize, gender_direction, hard_debias, neutralize

WEFE_FIXTURE = Path(__file__).parent / "fixtures" / "hard_debias" / "wefe_glove50d.npz"
EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture(scope="module")
def glove():
    return load_embedded_glove()


@pytest.fixture(scope="module")
def debiased(glove):
    return hard_debias(glove)


@pytest.fixture(scope="module")
def wefe():
    return dict(np.load(WEFE_FIXTURE))


def _tolerance(wefe, dim):
    """Both sides compute in float32 (WEFE: gensim's float32 vectors; its PCA in float64 on float32 input).
    A dot product of D unit-vector terms carries a rounding error of about sqrt(D) * eps (a random walk of
    D roundings; D * eps is the worst case). The direction inherits the error of its input matrix amplified
    by the eigengap, kappa = lambda1 / (lambda1 - lambda2) (Davis-Kahan), and a neutralised or equalised
    vector moves by at most twice the direction's error. So |ours - WEFE| <= (2 kappa + 1) sqrt(D) eps per
    coordinate; with GloVe-50d's ratios (kappa ~ 4) that is ~7.6e-6, the observed agreement ~4e-7."""
    ratio = wefe["explained_variance_ratio"]
    kappa = ratio[0] / (ratio[0] - ratio[1])
    return (2 * kappa + 1) * np.sqrt(dim) * EPS32, kappa * np.sqrt(dim) * EPS32


def test_debiaswe_lists_load():
    lists = load_debiaswe_lists()
    assert (len(lists.definitional_pairs), len(lists.equalize_pairs), len(lists.gender_specific)) == (10, 52, 1441)
    assert lists.definitional_pairs[0] == ("woman", "man") and ("Mary", "John") in lists.definitional_pairs


def test_matches_wefe_hard_debias_on_glove(glove, debiased, wefe):
    vector_tol, direction_tol = _tolerance(wefe, glove.dim)
    sign = np.sign(debiased.direction @ wefe["direction"])  # PCA's sign is arbitrary; no output depends on it
    np.testing.assert_allclose(debiased.direction, sign * wefe["direction"], atol=direction_tol, rtol=0)
    rows = [glove.index[str(w)] for w in wefe["words"]]
    np.testing.assert_allclose(debiased.table.matrix[rows], wefe["vectors"], atol=vector_tol, rtol=0)


def test_direction_is_the_pca_of_pair_centred_members(glove):
    lists = load_debiaswe_lists()
    pairs = np.array([[glove.index[a.lower()], glove.index[b.lower()]] for a, b in lists.definitional_pairs])
    g = np.asarray(gender_direction(glove.matrix, pairs))
    unit = glove.matrix / np.linalg.norm(glove.matrix, axis=1, keepdims=True)
    a, b = unit[pairs[:, 0]], unit[pairs[:, 1]]
    centre = (a + b) / 2
    members = np.concatenate([a - centre, b - centre]).astype(np.float64)
    top = np.linalg.eigh(members.T @ members)[1][:, -1]
    assert abs(g @ top) == pytest.approx(1.0, abs=1e-5) and np.linalg.norm(g) == pytest.approx(1.0, abs=1e-6)
    projections = (a - b) @ g  # oriented from the second word (male) to the first (female), in sum
    assert projections.sum() > 0 and np.mean(projections > 0) >= 0.8  # GloVe-50d: female/male barely differ
    # PCA of the differences centred on their mean drops the shared component: a nearly orthogonal direction
    differences = (a - b) - (a - b).mean(axis=0)
    assert abs(np.linalg.svd(differences)[2][0] @ g) < 0.5


def _specific_rows(table, words):
    return {table.index[w.lower()] for w in words if w.lower() in table.index}


def test_properties_on_glove(glove, debiased):
    m, g = debiased.table.matrix, debiased.direction
    tol = 4 * np.sqrt(glove.dim) * EPS32
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), 1.0, atol=tol)
    keep = _specific_rows(glove, load_debiaswe_lists().gender_specific)
    equalised = {glove.index[w] for pair in debiased.equalized for w in pair}
    neutral = np.ones(len(glove.words), dtype=bool)
    neutral[list(keep | equalised)] = False
    assert debiased.n_neutralized == len(glove.words) - len(keep)
    assert np.abs(m[neutral] @ g).max() < tol  # neutralised: no component along the direction
    for a, b in debiased.equalized:  # symmetric about the direction, equally far from it
        va, vb = m[glove.index[a]], m[glove.index[b]]
        assert va @ g == pytest.approx(-(vb @ g), abs=tol) and abs(va @ g) > 0.05
        np.testing.assert_allclose(va - (va @ g) * g, vb - (vb @ g) * g, atol=tol)
    assert ("he", "she") in debiased.equalized and m[glove.index["she"]] @ g > 0
    unchanged = sorted(keep - equalised)  # gender-specific words: only scaled to unit length
    original = glove.matrix[unchanged] / np.linalg.norm(glove.matrix[unchanged], axis=1, keepdims=True)
    np.testing.assert_allclose(m[unchanged], original, atol=tol)
    assert debiased.table.words is glove.words and "hard-debiased" in debiased.table.source


def test_missing_words_are_reported(glove, debiased):
    assert debiased.missing["definitional_pairs"] == ()  # Mary/John are found as mary/john
    assert "Catholic_priest" in debiased.missing["equalize_pairs"]
    assert "prostate_cancer" in debiased.missing["gender_specific"] and "He" not in debiased.missing["gender_specific"]
    result = hard_debias(
        glove,
        definitional_pairs=[("woman", "man"), ("zzqxw", "he")],
        equalize_pairs=[("she", "he"), ("qqzzx", "king")],
        gender_specific=["he", "she", "xqzzq"],
    )
    assert result.missing == {
        "definitional_pairs": ("zzqxw",),
        "equalize_pairs": ("qqzzx",),
        "gender_specific": ("xqzzq",),
    }
    assert result.equalized == (("she", "he"),)
    with pytest.raises(DataError, match=r"no definitional pair has both words.*\['zzqxw'\]"):
        hard_debias(glove, definitional_pairs=[("zzqxw", "he")], equalize_pairs=[], gender_specific=[])


# --- small tables: the case rule, array input, pairs sharing a word ----------------------------------------


def _toy(seed=0, words=("she", "he", "mary", "John", "doctor", "nurse", "queen", "king", "aunt", "uncle")):
    rng = np.random.default_rng(seed)
    return list(words), rng.normal(size=(len(words), 6)).astype(np.float32)


def _reference(words, matrix, definitional, equal, specific):
    """Bolukbasi's equations as a plain NumPy loop in float64 (as WEFE orders them)."""
    index = {w: i for i, w in enumerate(words)}
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    diffs = np.array([(unit[index[a]] - unit[index[b]]) / 2 for a, b in definitional], dtype=np.float64)
    g = np.linalg.svd(np.concatenate([diffs, -diffs]))[2][0]
    out = unit.astype(np.float64).copy()
    for i, w in enumerate(words):
        if w not in specific:
            v = out[i] - (out[i] @ g) * g
            out[i] = v / np.linalg.norm(v)
    for a, b in equal:
        ua, ub = unit[index[a]], unit[index[b]]
        mu = (ua + ub) / 2
        nu = mu - (mu @ g) * g
        z = np.sqrt(1 - nu @ nu) * (1 if (ua - ub) @ g >= 0 else -1)
        out[index[a]], out[index[b]] = nu + z * g, nu - z * g
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_array_input_case_rule_and_a_word_in_two_pairs_matches_a_numpy_loop():
    words, matrix = _toy()
    result = hard_debias(
        matrix,
        words,
        definitional_pairs=[("she", "he"), ("Mary", "john"), ("queen", "king")],  # Mary -> mary; john: missing
        equalize_pairs=[("aunt", "uncle"), ("Queen", "King"), ("aunt", "nurse")],  # aunt twice: last pair wins
        gender_specific=["She", "HE", "queen", "king"],
    )
    assert result.missing == {"definitional_pairs": ("john",), "equalize_pairs": (), "gender_specific": ()}
    assert result.equalized == (("aunt", "uncle"), ("queen", "king"), ("aunt", "nurse"))
    expected = _reference(
        words,
        matrix,
        [("she", "he"), ("queen", "king")],
        [("aunt", "uncle"), ("queen", "king"), ("aunt", "nurse")],
        {"she", "he", "queen", "king"},
    )
    np.testing.assert_allclose(result.table.matrix, expected, atol=20 * EPS32)
    assert result.n_neutralized == len(words) - 4 and result.table.lowercase is False


def test_cased_table_finds_a_capitalised_word_as_given():
    words, matrix = _toy(words=("she", "he", "He", "doctor"))
    table = StaticEmbeddings(words, matrix, lowercase=False)
    result = hard_debias(table, definitional_pairs=[("she", "He")], equalize_pairs=[], gender_specific=["He"])
    expected = _reference(words, matrix, [("she", "He")], [], {"He"})
    np.testing.assert_allclose(result.table.matrix, expected, atol=20 * EPS32)
    np.testing.assert_allclose(result.table.matrix[2], matrix[2] / np.linalg.norm(matrix[2]), atol=4 * EPS32)


def test_kernels_and_bad_inputs():
    words, matrix = _toy()
    unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    g = np.asarray(gender_direction(matrix, [[0, 1], [6, 7]]))
    assert np.abs(np.asarray(neutralize(unit, g)) @ g).max() < 10 * EPS32
    a, b = (np.asarray(x) for x in equalize(unit[[0, 6]], unit[[1, 7]], g))
    np.testing.assert_allclose(a @ g, -(b @ g), atol=10 * EPS32)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=10 * EPS32)
    with pytest.raises(DataError, match="vocab"):
        hard_debias(matrix)
    with pytest.raises(DataError, match=r"equalize_pairs\[0\] \('she',\) is not a pair"):
        hard_debias(matrix, words, definitional_pairs=[("she", "he")], equalize_pairs=[("she",)], gender_specific=[])
    with pytest.raises(DataError, match="names one word of"):
        hard_debias(
            StaticEmbeddings(words, matrix, lowercase=True),
            definitional_pairs=[("she", "he")],
            equalize_pairs=[("doctor", "Doctor")],
            gender_specific=[],
        )
    with pytest.raises(DataError, match="at least one pair"):
        gender_direction(matrix, np.zeros((0, 2), dtype=int))
