"""The statistics options travel as one value (issue 17, point 6): :class:`jaxassoc.stats.StatsOptions`
holds the defaults the app's ``stats`` group extends, and the suite readouts take it whole."""

import dataclasses

import jax
import numpy as np

from jaxassoc.app.config import StatsConfig
from jaxassoc.data.weat import WeatSuite, WeatTest
from jaxassoc.embeddings.static import Lookup
from jaxassoc.metrics.weat import weat
from jaxassoc.readouts.weat import run_sc_weat_experiment, run_weat_experiment
from jaxassoc.stats import StatsOptions

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
    options, config = StatsOptions(), StatsConfig()
    assert isinstance(config, StatsOptions)
    assert {f.name for f in dataclasses.fields(StatsOptions)} == set(options.as_kwargs())
    assert config.as_kwargs() == options.as_kwargs()  # alpha is the app's own
    assert "alpha" not in config.as_kwargs() and "n_bootstrap" not in options.permutation_kwargs()


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
        **options.as_kwargs(),
    )
    assert row["d_raw"] == float(direct.d) and row["p_raw"] == float(direct.p_value)
    assert (row["ci_low_raw"], row["ci_high_raw"]) == (float(direct.ci_low), float(direct.ci_high))
    assert {k: row[k] for k in options.as_kwargs()} == options.as_kwargs()
    assert row["p_resamples_raw"] == 500  # Monte Carlo, as exact_bound=0 asks


def test_sc_weat_reports_the_permutation_options_it_used():
    options = StatsOptions(n_permutations=200, exact_bound=0, alternative="less")
    table = run_sc_weat_experiment(_vectors, SUITE, key=jax.random.key(0), options=options)
    assert len(table) == 6
    assert (table["n_permutations"] == 200).all() and (table["alternative"] == "less").all()
    assert (table["p_resamples"] == 200).all()
