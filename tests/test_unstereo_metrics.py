"""UnStereoEval metric kernels against an independent NumPy/SciPy reference and hand-made cases."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import trapezoid
from tolerances import f32_sum

from jaxassoc.errors import InputError
from jaxassoc.metrics import unstereo as m


def _reference(logp_male, logp_female, keep, log10_aufc):
    """Direct NumPy transcription of docs/methods.md §4 on the kept rows."""
    fm = (logp_female - logp_male)[keep]
    fm10 = fm / np.log(10)
    neutral = np.abs(fm10) <= np.log10(1.65)
    n = fm.size
    p = neutral.mean()
    male = (~neutral & (fm < 0)).sum()
    female = (~neutral & (fm > 0)).sum()
    eps = np.linspace(0, 6, 101)
    size = np.abs(fm10) if log10_aufc else np.abs(fm)
    curve = [(size <= e).mean() for e in eps]
    return {
        "us_score": 100 * p,
        "us_std_error": 100 * math.sqrt(p * (1 - p) / n),
        "pct_male": 100 * male / n,
        "pct_female": 100 * female / n,
        "preference_disparity": 100 * (female - male) / n,
        "male_rel_ratio": male / (n - neutral.sum()),
        "aufc": trapezoid(curve, eps),
        "n": n,
        "n_neutral": neutral.sum(),
        "n_nonneutral": n - neutral.sum(),
    }


@pytest.fixture(scope="module")
def synthetic():
    rng = np.random.default_rng(0)
    n = 600
    logp_male = rng.normal(-40, 8, n)
    logp_female = logp_male + rng.normal(-0.3, 1.5, n)
    pmi = rng.normal(0, 0.6, n)
    return logp_male, logp_female, pmi


@pytest.mark.parametrize("units", ["parity", "log10", "ln"])
def test_unstereo_eval_matches_the_numpy_reference(synthetic, units):
    logp_male, logp_female, pmi = synthetic
    out = m.unstereo_eval(logp_male, logp_female, pmi, aufc_units=units)
    assert list(out) == ["unconstrained", "0.3", "0.5", "0.65", "0.8", "1.0"]
    for key, result in out.items():
        keep = np.ones(pmi.size, bool) if key == "unconstrained" else (np.abs(pmi) <= float(key))
        log10 = units == "log10" or (units == "parity" and key == "unconstrained")
        expected = _reference(logp_male, logp_female, keep, log10)
        for field, value in expected.items():
            got = float(getattr(result, field))
            # float64 on both sides (counts, shares, a square root): ~1e-15 relative
            np.testing.assert_allclose(got, value, rtol=1e-12, atol=1e-12, err_msg=f"{key} {field}")


def test_bounds_are_inclusive():
    # FM = 0 with threshold 0: neutral only under <=.
    assert bool(m.is_neutral(jnp.array([0.0]), 0.0)[0])
    assert not bool(m.is_neutral(jnp.array([1e-6]), 0.0)[0])
    assert m.maxpmi_mask(jnp.array([-0.5, 0.5, 0.5000001, -0.50001]), 0.5).tolist() == [True, True, False, False]
    with jax.enable_x64(True):
        ln_ratio = jnp.log(jnp.float64(1.65))
        fm = jnp.array([0.99 * ln_ratio, -0.99 * ln_ratio, 1.01 * ln_ratio])
        assert m.is_neutral(fm).tolist() == [True, True, False]


def test_hand_counted_example():
    # FM: 0 (neutral), -2 (male), +2 (female), -3 (male), 0.1 (neutral).
    male = np.zeros(5)
    female = np.array([0.0, -2.0, 2.0, -3.0, 0.1])
    r = m.unstereo_eval(male, female, etas=())["unconstrained"]
    assert (int(r.n), int(r.n_neutral), int(r.n_nonneutral)) == (5, 2, 3)
    assert float(r.us_score) == pytest.approx(40.0)
    assert float(r.pct_male) == pytest.approx(40.0) and float(r.pct_female) == pytest.approx(20.0)
    assert float(r.preference_disparity) == pytest.approx(-20.0)
    assert float(r.male_rel_ratio) == pytest.approx(2 / 3)
    assert float(r.us_std_error) == pytest.approx(100 * math.sqrt(0.4 * 0.6 / 5))


def test_aufc_of_all_neutral_pairs_is_the_epsilon_range():
    fm = jnp.zeros(4)
    eps = jnp.linspace(0, 6, 101)
    assert float(m.aufc(fm, jnp.ones(4, bool), eps, log10_units=True)) == pytest.approx(6.0)


def test_kernel_is_jittable_vmappable_and_float32():
    rng = np.random.default_rng(1)
    fm = jnp.asarray(rng.normal(0, 1, 50), jnp.float32)
    masks = jnp.asarray(rng.random((3, 50)) < 0.7)
    eps = jnp.linspace(0, 6, 101, dtype=jnp.float32)
    batched = jax.vmap(lambda mask: m.unstereo_metrics(fm, mask, eps))(masks)
    assert batched.us_score.shape == (3,) and batched.us_score.dtype == jnp.float32
    for i in range(3):
        single = m.unstereo_metrics(fm, masks[i], eps)
        # the same float32 comparisons; the area, a sum of 101 trapezoids ≤ 6 / 100 each, in another order:
        # f32_sum(101, 0.06) (rtol=1e-6 had been below it)
        np.testing.assert_allclose(float(batched.aufc[i]), float(single.aufc), rtol=0, atol=f32_sum(101, 6 / 100))
    out32 = m.unstereo_eval(np.zeros(50), np.asarray(fm), etas=(), float64=False)["unconstrained"]
    out64 = m.unstereo_eval(np.zeros(50), np.asarray(fm, np.float64), etas=())["unconstrained"]
    assert out32.us_score.dtype == jnp.float32 and out64.us_score.dtype == jnp.float64
    # the area's sum as above; the float32 and float64 ε grids differ by rounding, which would flip a step
    # (moving AUFC by 0.06 / 50) only for an |FM| within ~1e-7 of a grid point: none here
    np.testing.assert_allclose(float(out32.aufc), float(out64.aufc), rtol=0, atol=f32_sum(101, 6 / 100))


def test_empty_subset_gives_nan_rates_and_zero_counts():
    r = m.unstereo_eval(np.zeros(3), np.ones(3), np.array([2.0, 3.0, -5.0]), etas=(0.3,))["0.3"]
    assert int(r.n) == 0 and np.isnan(float(r.us_score)) and np.isnan(float(r.aufc))


def test_input_errors_name_the_rows():
    good = np.zeros(4)
    with pytest.raises(InputError, match=r"rows \[1, 3\]"):
        m.unstereo_eval(good, good, np.array([0.1, np.nan, 0.2, np.nan]))
    # No η requested: missing MaxPMI is fine.
    m.unstereo_eval(good, good, np.array([0.1, np.nan, 0.2, np.nan]), etas=())
    with pytest.raises(InputError, match="need max_gender_pmi"):
        m.unstereo_eval(good, good)
    with pytest.raises(InputError, match="3 rows but logp_male has 4"):
        m.unstereo_eval(good, np.zeros(3), etas=())
    with pytest.raises(InputError, match=r"rows \[2\]"):
        m.unstereo_eval(good, np.array([0.0, 0.0, np.inf, 0.0]), etas=())
    with pytest.raises(InputError, match="aufc_units"):
        m.unstereo_eval(good, good, etas=(), aufc_units="log2")
    with pytest.raises(InputError, match="η"):
        m.unstereo_eval(good, good, good, etas=(-0.5,))
    with pytest.raises(InputError, match="1-D"):
        m.unstereo_eval(np.zeros((2, 2)), np.zeros((2, 2)), etas=())
