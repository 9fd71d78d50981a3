"""The statistics options travel as one value (issue 17, point 6): :class:`jaxassoc.stats.StatsOptions`
holds the defaults the app's ``stats`` group extends, and the suite readouts take it whole."""

import dataclasses
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxassoc.app.config import StatsConfig
from jaxassoc.data.weat import WeatSuite, WeatTest
from jaxassoc.embeddings.static import Lookup
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.weat import weat
from jaxassoc.stats import StatsOptions
from jaxassoc.suites.weat import run_sc_weat_experiment, run_weat_experiment

WORDS = {
    w: np.random.default_rng(i).normal(size=8).astype(np.float32)
    for i, w in enumerate(
        ["rose", "tulip", "lily", "ant", "wasp", "moth", "joy", "love", "peace", "pain", "hate", "war"]
    )
}
TEST = WeatTest(
    id="T1",
    name="flowers vs insects",
    targets_x=("rose", "tulip", "lily"),
    targets_y=("ant", "wasp", "moth"),
    attributes_a=("joy", "love", "peace"),
    attributes_b=("pain", "hate", "war"),
    x_name="flowers",
    y_name="insects",
    a_name="pleasant",
    b_name="unpleasant",
)
SUITE = WeatSuite(name="tiny", tests=(TEST,), source="inline")


def _vectors(words, name):
    return Lookup(np.stack([WORDS[w] for w in words]), tuple(words), ())


def test_the_app_stats_group_takes_its_defaults_from_the_options_value():
    """StatsConfig stays mutable (Hydra's overrides write into it), so it repeats StatsOptions' fields, in
    their order and with their types and defaults, and hands them over as one frozen value."""
    options, config = StatsOptions(), StatsConfig()
    fields = [(f.name, f.type, f.default) for f in dataclasses.fields(StatsOptions)]
    assert [(f.name, f.type, f.default) for f in dataclasses.fields(StatsConfig)][: len(fields)] == fields
    assert {name for name, _, _ in fields} == set(options.as_dict())
    assert config.options() == options and type(config.options()) is StatsOptions  # alpha is the app's own
    changed = StatsConfig(n_permutations=500, ties="strict", alpha=0.01)
    assert changed.options() == StatsOptions(n_permutations=500, ties="strict")
    assert "n_bootstrap" not in options.permutation_dict()


def test_the_options_value_is_frozen_hashable_and_a_static_jit_argument():
    options = StatsOptions(n_permutations=500)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.n_permutations = 10  # type: ignore[misc]
    assert hash(options) == hash(StatsOptions(n_permutations=500)) and options != StatsOptions()
    assert dataclasses.replace(options, ties="strict").n_permutations == 500

    calls = []

    @functools.partial(jax.jit, static_argnames="options")
    def scaled(x, options: StatsOptions = StatsOptions()):
        calls.append(options)  # runs once per compilation
        return x * options.n_permutations

    assert float(scaled(jnp.float32(2.0), options=options)) == 1000.0
    assert float(scaled(jnp.float32(3.0), options=StatsOptions(n_permutations=500))) == 1500.0  # an equal value
    assert float(scaled(jnp.float32(1.0))) == StatsOptions().n_permutations
    assert calls == [options, StatsOptions()]


def test_the_kernels_take_the_options_whole_with_the_one_default():
    """Each default is written once, in StatsOptions: the test kernels take it whole, not as loose keywords."""
    from jaxassoc.metrics.rpam import rpam_test
    from jaxassoc.metrics.weat import association_test, sc_weat
    from jaxassoc.stats import permutation_test, permutation_test_batch, smallest_p

    loose = {f.name for f in dataclasses.fields(StatsOptions)}
    for kernel in (permutation_test, permutation_test_batch, smallest_p, weat, sc_weat, association_test, rpam_test):
        parameters = inspect.signature(kernel).parameters
        assert parameters["options"].default == StatsOptions(), kernel.__name__
        assert not loose & set(parameters), kernel.__name__
    with pytest.raises(ConfigError, match="options must be a jaxassoc.stats.StatsOptions"):
        permutation_test(jax.random.key(0), np.arange(6.0), 3, options=StatsConfig())


def test_the_weat_readout_passes_the_options_whole_to_the_kernel():
    options = StatsOptions(
        ddof=0,
        exact_bound=0,
        n_permutations=500,
        n_bootstrap=300,
        confidence=0.9,
        alternative="two-sided",
        ties="inclusive",
    )
    row = run_weat_experiment(_vectors, SUITE, key=jax.random.key(3), options=options).iloc[0]
    direct = weat(
        jax.random.split(jax.random.key(3), 1)[0],
        *(_vectors(s, "").vectors for s in (TEST.targets_x, TEST.targets_y, TEST.attributes_a, TEST.attributes_b)),
        options=options,
    )
    assert row["d_raw"] == float(direct.d) and row["p_raw"] == float(direct.p_value)
    assert (row["ci_low_raw"], row["ci_high_raw"]) == (float(direct.ci_low), float(direct.ci_high))
    assert {k: row[k] for k in options.as_dict()} == options.as_dict()
    assert row["p_resamples_raw"] == 500  # Monte Carlo, as exact_bound=0 asks


def test_sc_weat_reports_the_permutation_options_it_used():
    options = StatsOptions(n_permutations=200, exact_bound=0, alternative="less")
    table = run_sc_weat_experiment(_vectors, SUITE, key=jax.random.key(0), options=options)
    assert len(table) == 6
    assert (table["n_permutations"] == 200).all() and (table["alternative"] == "less").all()
    assert (table["p_resamples"] == 200).all()
