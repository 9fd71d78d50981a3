"""Statistics options do what they say (issue 15, points 1, 2, 4, 8, 9, 12): ``stats.alternative`` and
``stats.confidence`` reach every p and CI, undefined statistics are NaN with a reason and never
significant, one word rule for every metric with word sets, every value range-checked and every unused
option refused by name before any model loads, string arrays and malformed templates refused by name."""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import yaml
from app_helpers import (
    FLOWERS,
    INSECTS,
    PLEASANT,
    UNPLEASANT,
    compose_config,
    run_metric,
    start_hydra,
    use_tiny_suite,
    write_tiny_glove,
)

from jaxassoc.app.config import StatsConfig, TemplateConfig
from jaxassoc.app.main import CONF_DIR, audit_parts, make_job, run_job
from jaxassoc.app.registry import get_metric
from jaxassoc.app.validation import field_default
from jaxassoc.errors import ConfigError, InputError
from jaxassoc.metrics import rpam
from jaxassoc.metrics.ceat import random_effects, weat_draw
from jaxassoc.metrics.weat import check_distinct_words, sc_weat, weat
from jaxassoc.stats import StatsOptions, permutation_test
from jaxassoc.stats.permutation import _random_partition, difference_of_sums
from jaxassoc.suites.weat import change_class

KEY = jax.random.key(0)


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


@pytest.fixture(scope="module")
def glove(tmp_path_factory):
    return write_tiny_glove(tmp_path_factory.mktemp("glove") / "tiny.txt")


def _sets(seed, sizes=(5, 5, 4, 4), dim=8, shift=0.3):
    rng = np.random.default_rng(seed)
    x, y, a, b = (rng.normal(size=(n, dim)).astype(np.float32) for n in sizes)
    return x + shift * (a.mean(0) - b.mean(0)), y, a, b


def _static(glove, *extra):
    return [
        "metric=weat",
        "model=glove-6b-50d",
        f"model.source={glove}",
        "model.name=tiny",
        "stats.exact_bound=0",
        "stats.n_permutations=400",
        "stats.n_bootstrap=200",
        *extra,
    ]


# --- point 1: stats.alternative --------------------------------------------------------------------------


@pytest.mark.slow  # ~6 s (issue 38: the default suite's budget)
def test_alternative_reaches_weat_rpam_and_ceat_p_values():
    x, y, a, b = _sets(1)
    p = {
        alt: float(weat(KEY, x, y, a, b, options=StatsOptions(n_bootstrap=50, alternative=alt)).p_value)
        for alt in ("greater", "less", "two-sided")
    }
    assert p["greater"] < 0.5 < p["less"]  # X shifted towards A
    assert p["greater"] + p["less"] >= 1.0 - 1e-6  # the observed arrangement counts in both directions
    # p's are float32 quotients of exact counts (≤ u·p each) and 2·p is exact: abs=1e-6
    assert p["two-sided"] == pytest.approx(min(1.0, 2 * min(p["greater"], p["less"])), abs=1e-6)

    probs = jax.nn.softmax(jax.random.normal(jax.random.key(3), (8, 6)), axis=-1)
    greater, less = (
        float(rpam.rpam_test(KEY, probs, n_x=4, n_a=3, options=StatsOptions(n_bootstrap=50, alternative=alt)).p_value)
        for alt in ("greater", "less")
    )
    assert greater != less and greater + less >= 1.0 - 1e-6

    es, v = jnp.array([0.3, 0.5, 0.4]), jnp.array([0.2, 0.3, 0.25])
    ce = {alt: float(random_effects(es, v, alternative=alt).p_value) for alt in ("greater", "less", "two-sided")}
    # Φ(z) and Φ(-z) in float32: a few ulps each (abs=1e-6); the two-sided p = 2·Φ(-|z|) from its own
    # float32 evaluation, a few ulps relative (rel=1e-5)
    assert ce["greater"] + ce["less"] == pytest.approx(1.0, abs=1e-6)
    assert ce["two-sided"] == pytest.approx(2 * min(ce["greater"], ce["less"]), rel=1e-5)


@pytest.mark.slow  # ~6 s (issue 38: the default suite's budget)
def test_alternative_and_confidence_change_the_weat_job(glove, monkeypatch, tmp_path):
    use_tiny_suite(monkeypatch)
    base = run_metric(_static(glove), tmp_path).aggregates.set_index("test")
    greater = run_metric(_static(glove, "stats.alternative=greater"), tmp_path).aggregates.set_index("test")
    less = run_metric(_static(glove, "stats.alternative=less"), tmp_path).aggregates.set_index("test")
    assert set(base["alternative"]) == {"two-sided"}  # the default: a two-sided p beside a two-sided CI
    for test in ("W1", "W2"):  # one-sided p's of opposite directions, both counting the observed arrangement
        assert less.loc[test, "p_raw"] != greater.loc[test, "p_raw"]
        assert greater.loc[test, "p_raw"] + less.loc[test, "p_raw"] >= 1.0 - 1e-6
        assert base.loc[test, "p_raw"] == pytest.approx(
            min(1.0, 2 * min(greater.loc[test, "p_raw"], less.loc[test, "p_raw"]))
        )
        # a one-sided CI beside a one-sided p: [lo, inf) for greater, (-inf, hi] for less, lo above the two-sided lo
        assert greater.loc[test, "ci_high_raw"] == np.inf and less.loc[test, "ci_low_raw"] == -np.inf
        assert base.loc[test, "ci_low_raw"] <= greater.loc[test, "ci_low_raw"] <= base.loc[test, "d_raw"]
    assert set(less["alternative"]) == {"less"}
    narrow = run_metric(_static(glove, "stats.confidence=0.5"), tmp_path).aggregates.set_index("test")
    width = lambda t: t["ci_high_raw"] - t["ci_low_raw"]  # noqa: E731
    assert (width(narrow) < width(base)).all()
    assert set(narrow["confidence"]) == {0.5}
    np.testing.assert_array_equal(narrow["d_raw"], base["d_raw"])


# --- point 9 (and 1, 2): every number range-checked, every unused option refused, before any model loads ----


@pytest.mark.parametrize(
    "override, match",
    [
        ("stats.alternative=bogus", r"stats.alternative='bogus' is not supported: use one of greater, less, two-sided"),
        ("stats.confidence=1.5", r"stats.confidence=1.5 is out of range"),
        ("stats.ddof=5", r"stats.ddof=5 is not supported: use one of 1, 0"),
        ("stats.alpha=2", r"stats.alpha=2.0 is out of range"),
        ("stats.n_permutations=3000000000", r"stats.n_permutations=3000000000 is out of range.*10,000,000"),
        ("stats.n_permutations=1000000000", r"stats.n_permutations=1000000000 is out of range"),
        ("stats.n_bootstrap=0", r"stats.n_bootstrap=0 is out of range"),
        ("stats.n_bootstrap=1", r"stats.n_bootstrap=1 is out of range: it must be >= 40 .*95% CI's percentiles need"),
        ("stats.exact_bound=-1", r"stats.exact_bound=-1 is out of range"),
        ("stats.ties=loose", r"stats.ties='loose' is not supported"),
        ("dataset.sample=5", r"dataset.sample=5 has no effect with metric=weat"),
        ("dataset.sample=0", r"dataset.sample=0 is out of range"),
        ("stats.alpha=0.01", r"stats.alpha=0.01 has no effect with metric=weat.*whitening=zca"),
        ("whitening.eps=0", r"whitening.eps=0.0 is out of range"),
        ("template=tp1", r"template.name='tp1' has no effect with metric=weat"),
        ("metric.layer=0", r"metric.layer=0 has no effect.*contextual word vectors only"),
        ("metric.similarity=false", r"metric.similarity=False has no effect.*whitening=zca"),
    ],
)
def test_bad_or_unused_weat_options_are_refused_by_name(glove, no_model, tmp_path, override, match):
    with pytest.raises(ConfigError, match=match):
        run_job(compose_config(_static(glove, override)), tmp_path)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            ["metric=rpam", "template=tp1", "dataset=bellezza", "metric.group_size=0"],
            r"metric.group_size=0 is out of range",
        ),
        (
            ["metric=rpam", "template=tp1", "dataset=weat_ws", "metric.group_size=5"],
            r"metric.group_size=5 has no effect.*Bellezza",
        ),
        (
            ["metric=rpam", "template=tp1", "dataset=bellezza", "stats.n_permutations=1000"],
            r"stats.n_permutations=1000 has no effect with metric=rpam dataset=bellezza",
        ),
        (
            ["metric=rpam", "template=tp1", "dataset=weat_ws", "stats.alpha=0.01"],
            r"stats.alpha=0.01 has no effect with metric=rpam",
        ),
        (["metric=rpam", "template=tp1", "dataset=weat_ws", "dataset.sample=5"], r"dataset.sample=5 has no effect"),
        (
            ["metric=rpam", "template=tp1", "dataset=bellezza", "metric.max_new_tokens=4"],
            r"metric.max_new_tokens=4 has no effect.*downstream",
        ),
        (["metric=set", "dataset=abc", "stats.ddof=0"], r"stats.ddof=0 has no effect with metric=set"),
        (
            ["metric=ilps", "dataset=abc", "metric.set_transform=log1m"],
            r"metric.set_transform='log1m' has no effect.*SeT",
        ),
        (
            ["metric=unstereo", "dataset=use5", "stats.n_bootstrap=40"],
            r"stats.n_bootstrap=40 has no effect with metric=unstereo",
        ),
        (
            ["metric=ceat", "model=minilm-l6", "stats.ddof=0"],
            r"stats.ddof=0 has no effect with metric=ceat.*stats.alternative",
        ),
        (["metric=ceat", "model=minilm-l6", "metric.n_draws=1"], r"metric.n_draws=1 is out of range"),
        (["metric=ceat", "model=minilm-l6", "metric.context_seed=-1"], r"metric.context_seed=-1 is out of range"),
        (["metric=intersectional", "dataset=abc", "metric.groups=[woman,woman]"], r"metric.groups repeats \['woman'\]"),
        (
            ["metric=unstereo", "dataset=use5", "metric.tokens_per_batch=0"],
            r"metric.tokens_per_batch=0 is out of range",
        ),
    ],
)
def test_bad_or_unused_options_of_other_metrics_are_refused_by_name(no_model, tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        run_job(compose_config(overrides), tmp_path)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            ["seed=4294967296"],
            r"seed=4294967296 is out of range: it must be >= 0 and <= 4,294,967,295; "
            r"jax.random.key would draw it as seed 0",
        ),
        (["seed=-1"], r"seed=-1 is out of range.*as seed 4294967295 and numpy refuses a negative seed"),
        (["seed=9223372036854775808"], r"seed=9223372036854775808 is out of range"),
        ([f"stats.n_permutations={10**400}"], r"stats.n_permutations=10{400} is out of range"),
    ],
)
def test_integer_options_beyond_their_range_are_refused_by_name(glove, no_model, tmp_path, overrides, match):
    """Issue 25 item 14: seed 2^32 drew as seed 0 (jax.random.key keeps 32 bits), -1 as 2^32 - 1 (numpy
    refused it mid-run), 2^63 crashed JAX; an integer beyond a float's range crashed the range check."""
    with pytest.raises(ConfigError, match=match):
        run_job(compose_config(_static(glove, *overrides)), tmp_path)


def test_audit_forwards_stats_options_only_to_the_parts_that_read_them():
    overrides = ["stats.n_permutations=1000", "stats.alpha=0.01"]
    parts = {part.name: cfg.stats for part, cfg in audit_parts(compose_config(overrides), overrides)}
    default = StatsConfig()
    assert parts["rpam_weat_ws"].n_permutations == 1000 and parts["rpam_weat_ws"].alpha == default.alpha
    assert parts["weat_glove_zca"].n_permutations == 1000 and parts["weat_glove_zca"].alpha == 0.01
    for name in ("rpam_bellezza", "stereotypes_set", "unstereo_use5"):
        assert (parts[name].n_permutations, parts[name].alpha) == (default.n_permutations, default.alpha)
    with pytest.raises(ConfigError, match=r"stats.alpha=2.0 is out of range"):
        audit_parts(compose_config(["stats.alpha=2"]), ["stats.alpha=2"])
    with pytest.raises(ConfigError, match=r"dataset.sample=5 reaches no part of the audit"):
        audit_parts(compose_config(["dataset.sample=5"]), ["dataset.sample=5"])


def test_metric_yaml_values_are_the_dataclass_defaults():
    """One source of truth: a YAML restating an option must agree with its dataclass, or the app would
    refuse the default YAML as an unused non-default value."""
    yamls = sorted(p for p in (CONF_DIR / "metric").glob("*.yaml") if p.stem != "audit")
    assert {p.stem for p in yamls} >= {"weat", "rpam", "set", "ilps", "ilps_star", "unstereo", "ceat"}
    for path in yamls:  # the built-in metrics (other tests may have registered plugins without a YAML)
        name, spec = path.stem, get_metric(path.stem)
        values = yaml.safe_load(path.read_text())
        defaults = {f.name: field_default(f) for f in __import__("dataclasses").fields(spec.config)}
        for key, value in values.items():
            if key not in ("defaults", "name"):
                assert value == defaults[key], f"conf/metric/{name}.yaml {key}: {value!r} vs {defaults[key]!r}"


def test_permutation_library_caps_partitions_and_draws_keys_by_fold_in():
    with pytest.raises(ConfigError, match="n_permutations must lie in 1..10,000,000"):
        permutation_test(KEY, np.arange(6.0), 3, options=StatsOptions(exact_bound=0, n_permutations=3_000_000_000))
    with pytest.raises(ConfigError, match="exact_bound must lie in 0..10,000,000"):
        permutation_test(KEY, np.arange(6.0), 3, options=StatsOptions(exact_bound=10**9))
    values = np.random.default_rng(0).normal(size=30).astype(np.float32)
    res = permutation_test(
        KEY, values, 12, options=StatsOptions(exact_bound=0, n_permutations=5000, alternative="greater")
    )
    observed = difference_of_sums(jnp.asarray(values), jnp.arange(30) < 12)
    keys = jax.random.split(KEY, 5000)  # the documented keys, all at once (the test streams them)
    s = jax.vmap(lambda k: difference_of_sums(jnp.asarray(values), _random_partition(k, 30, 12)))(keys)
    # the same draws and the same float32 statistic: equal counts, the quotient ≤ u·p
    assert float(res.p_value) == pytest.approx((float(jnp.sum(s >= observed)) + 1) / 5001, abs=1e-7)


# --- point 4: undefined statistics --------------------------------------------------------------------------


def test_degenerate_weat_rpam_and_ceat_are_undefined_not_significant():
    x, y, a, _ = _sets(2)
    words = (list("abcde"), list("fghij"), list("klmn"), list("opqr"))
    few = StatsOptions(n_bootstrap=50)
    for b in (a + 0.0, a[::-1] * 2.0):  # B = A, and A reversed and rescaled: s is rounding noise (~1e-9)
        res = weat(KEY, x, y, a, b, words=words, options=few)
        assert not bool(res.defined)
        assert all(math.isnan(float(v)) for v in (res.d, res.p_value, res.ci_low, res.ci_high))
    assert bool(weat(KEY, x, y, a, a[::-1] + 0.01, words=words, options=few).defined)  # a real difference
    es, _ = weat_draw(*(jnp.asarray(v) for v in (x, y, a, a[::-1])))
    assert math.isnan(float(es))
    flat = jnp.full((8, 6), 1 / 6)  # every target gives every attribute the same probability
    r = rpam.rpam_test(KEY, flat, n_x=4, n_a=3, options=StatsOptions(n_bootstrap=50))
    assert not bool(r.defined) and math.isnan(float(r.p_value)) and math.isnan(float(r.d))
    assert change_class(float("nan"), 0.01) == change_class(0.01, float("nan")) == "Undefined"


def test_degenerate_test_in_the_weat_job_is_undefined_with_a_reason(monkeypatch, tmp_path):
    """A and B of W1 have pairwise identical vectors: s = 0 for every target, raw and whitened."""
    use_tiny_suite(monkeypatch)
    glove = write_tiny_glove(tmp_path / "same.txt", same_as=dict(zip(UNPLEASANT, PLEASANT)))
    table = run_metric(
        [
            *_static(glove),
            "whitening=zca",
            "whitening.reference=vocabulary_uniform",
            "metric.similarity=false",
            "metric.anisotropy=false",
        ],
        tmp_path,
    ).aggregates.set_index("test")
    w1 = table.loc["W1"]
    assert np.isnan([w1.d_raw, w1.p_raw, w1.ci_low_raw, w1.ci_high_raw, w1.p_whitened]).all()
    assert "the same for every target" in w1.undefined_reason_raw
    assert "the same for every target" in w1.undefined_reason_whitened
    assert w1.change == w1.paper_class == "Undefined"
    assert table.loc["W2", "undefined_reason_raw"] == "" and np.isfinite(table.loc["W2", "p_raw"])


# --- point 8: one word rule ------------------------------------------------------------------------------


BAD_SETS = {
    "repeat in X": (dict(x=("rose", "tulip", "daisy", "rose")), r"'Flowers' repeats \['rose'\]"),
    "X and Y share": (dict(y=("ant", "spider", "moth", "tulip")), r"'tulip' is in both 'Flowers' and 'Insects'"),
    "A and B share": (dict(b=("war", "pain", "joy")), r"'joy' is in both 'Pleasant' and 'Unpleasant'"),
    "target is attribute": (dict(a=("love", "peace", "rose")), r"'rose' is in both 'Flowers' and 'Pleasant'"),
}


@pytest.mark.parametrize("case", list(BAD_SETS))
@pytest.mark.parametrize(
    "metric",
    [
        ["metric=weat", "model=glove-6b-50d"],
        ["metric=rpam", "template=tp1", "dataset=weat_ws"],
        ["metric=ceat", "model=minilm-l6"],
    ],
)
def test_every_metric_with_word_sets_refuses_repeated_and_shared_words(monkeypatch, no_model, tmp_path, metric, case):
    sets, match = BAD_SETS[case]
    use_tiny_suite(monkeypatch, **sets)
    with pytest.raises(InputError, match=match):
        run_job(compose_config(metric), tmp_path)


def test_weat_api_applies_the_word_rule_to_words_and_bare_vectors():
    x, y, a, b = _sets(3, sizes=(3, 3, 2, 2))
    with pytest.raises(InputError, match=r"'X' repeats \['w'\]"):
        weat(KEY, x, y, a, b, words=(["w", "v", "w"], ["p", "q", "r"], ["s", "t"], ["u", "z"]))
    with pytest.raises(InputError, match=r"the same vector is in 'X' row 0 and 'Y' row 2"):
        weat(KEY, x, np.concatenate([y[:2], x[:1]]), a, b)
    with pytest.raises(InputError, match="word set 'B' repeats"):
        check_distinct_words("T", (FLOWERS, INSECTS, PLEASANT, ("war", "war")))


# --- point 12 (part): string arrays to weat(), malformed templates ----------------------------------------


def test_weat_given_words_instead_of_vectors_names_the_set():
    _, y, a, b = _sets(4)
    with pytest.raises(
        InputError, match=r"word set 'Flowers': expected numeric vectors.*words instead of their vectors"
    ):
        weat(KEY, np.array(["rose", "tulip"]), y, a, b, names=("Flowers", "Y", "A", "B"))
    with pytest.raises(InputError, match=r"word set 'Y': rows of different lengths"):
        weat(KEY, y, [[1.0, 2.0], [1.0]], a, b)


@pytest.mark.parametrize(
    "text, match",
    [
        ("These words are associated: {target and", r"template 'mine': text .* is malformed"),
        ("These words are associated: {target} and }", "is malformed"),
        ("These words are associated: and", r"no \{target\} slot"),
        ("{target} and {other}", r"unknown slots \['other'\]"),
    ],
)
def test_malformed_template_is_refused_at_config_time(no_model, tmp_path, text, match):
    with pytest.raises(ConfigError, match=match):
        TemplateConfig("mine", text)
    cfg = compose_config(
        ["metric=rpam", "dataset=weat_ws", "template=tp1", "template.name=mine", f"template.text='{text}'"]
    )
    with pytest.raises(ConfigError, match=match):
        make_job(cfg, Path(tmp_path))


def test_the_api_refuses_a_ddof_the_cli_refuses_instead_of_returning_nan_as_defined():
    x, y, a, b = _sets(1)
    probs = jax.nn.softmax(jax.random.normal(jax.random.key(3), (8, 6)), axis=-1)
    for call in (
        lambda: weat(KEY, x, y, a, b, options=StatsOptions(ddof=5)),
        lambda: sc_weat(KEY, x, a, b, options=StatsOptions(ddof=2)),
        lambda: rpam.rpam_test(KEY, probs, n_x=4, n_a=3, options=StatsOptions(ddof=True)),
    ):
        with pytest.raises(InputError, match="is not supported: use 1 .sample std, Caliskan et al.. or 0"):
            call()
