"""Every option does what it says (issue 15, the generic test): for every option of every metric's config
dataclass and of ``stats``, changing it from a base run changes the result, or the run refuses it, or the
option is declared ``metadata={"affects_results": False}`` beside its definition (then the result must not
change). Options a metric does not read must be refused. Tiny in-process runs through the real configs
(:func:`app_helpers.run_metric`: ``make_job``, then the metric's ``run``) on a tiny WEAT suite, tiny
GloVe-like vectors and a tiny GPT-2; the default subset is WEAT's statistics options on static vectors.

A result is a job's items and aggregates without the columns that only echo a setting (named like an
option), compared with NaN = NaN, an absolute tolerance of 1e-12 and a relative one of 1e-6 (1e-3 for an
option declared without effect: a batch size may change float rounding, which a tiny random model's
ill-conditioned effect sizes amplify to about 3e-5; CEAT's ``chunk`` runs on the better-conditioned
"sharp" model, where the plain one reaches 1e-5 absolute).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
import transformers
from app_helpers import CORPUS, run_metric, small_abc, start_hydra, use_tiny_suite, write_corpus, write_tiny_glove
from safetensors.numpy import load_file, save_file

from jaxassoc.app.config import GROUP_SCHEMAS, StatsConfig
from jaxassoc.app.registry import METRICS
from jaxassoc.errors import JaxassocError

STATS_BASE = ["stats.exact_bound=0", "stats.n_permutations=200", "stats.n_bootstrap=100"]
STATS_CHANGES = {
    "stats.ddof": 0,
    "stats.exact_bound": 1000,
    "stats.n_permutations": 300,
    "stats.n_bootstrap": 150,
    "stats.confidence": 0.5,
    "stats.alternative": "less",
    "stats.ties": "strict",
    "stats.alpha": 0.9,
    "stats.correction": "holm",
}
STATIC = ["metric=weat", "model=glove-6b-50d", "model.source={glove}", "model.name=tiny"]
TINY_LM = ["model.name=tiny", "model.source={gpt2}", "cache_dir={cache}"]
SHARP_LM = ["model.name=sharp", "model.source={gpt2sharp}", "cache_dir={cache}"]
ZCA = ["whitening=zca"]
OTHER_CAUSAL_TEMPLATE = "People think that <pgroup> are <mask>."
DEFAULT_TEMPLATE = "Most <pgroup> are <mask>."
# SeT's optax options: refused with the exact solver; a shorter schedule and a tolerance no solve meets
# change the distances and the convergence counts. The optax runs score a smaller ABC (app_helpers.small_abc)
# from a short schedule: with the default 20 x 20 steps a solve costs about 9 ms per problem on 2 CPU cores,
# and a tolerance no solve meets solves every problem again with twice the steps.
OPTAX_BASE = ["metric.solver=optax", "metric.optax_outer_steps=5", "metric.optax_inner_steps=5"]
OPTAX_CHANGES = {
    "metric.optax_outer_steps": 2,
    "metric.optax_inner_steps": 2,
    "metric.optax_tolerance": 1e-9,
    "metric.shared_delta": True,
}


@dataclasses.dataclass
class Scenario:
    base: list[str]
    changes: dict[str, object]
    refused: frozenset[str] = frozenset()  # the changes the run must refuse (the others must run)
    small_abc: bool = False  # ABC on pole words, the pilot groups and 2 others (SeT's optax solves every prompt)


SCENARIOS: dict[str, list[Scenario]] = {
    "weat": [
        Scenario(
            [*STATIC, *STATS_BASE],
            {
                **{k: v for k, v in STATS_CHANGES.items() if k != "stats.alpha"},
                "metric.max_oov_share": 0.0,
                "stats.unit": "word",  # SEAT's option: WEAT's members are words
            },  # zinnia has no vector: 1 of 5 lost
            refused=frozenset({"metric.max_oov_share", "stats.unit"}),
        ),
        Scenario(
            [*STATIC, *STATS_BASE, *ZCA],
            {
                "stats.alpha": 0.9,
                "whitening.eps": 0.5,
                "whitening.reference": "vocabulary_uniform",
                "whitening.max_samples": 50,
                "metric.similarity": False,
                "metric.anisotropy": False,
                "metric.corpus": "{corpus}",
            },
        ),
        Scenario(
            ["metric=weat", *TINY_LM, *STATS_BASE, *ZCA, "metric.corpus={corpus}", "metric.similarity=false"],
            {
                "metric.layer": 0,
                "metric.max_contexts": 1,
                "metric.fallback": "templates",
                "metric.reference_level": "sentence",
                "metric.reference_sentences": 5,
                "metric.corpus": "{corpus2}",
            },
        ),
        Scenario(
            ["metric=weat", *TINY_LM, *STATS_BASE, *ZCA, "metric.corpus={corpus}"], {"metric.similarity_contexts": 1}
        ),
        Scenario(
            [*STATIC, "stats.exact_bound=0", "stats.n_permutations=200", "metric.single_category=true"],
            {
                "metric.single_category": False,
                "stats.ddof": 0,
                "stats.exact_bound": 1000,
                "stats.n_permutations": 300,
                "stats.alternative": "less",
                "stats.ties": "strict",
                "stats.n_bootstrap": 150,
                "stats.confidence": 0.5,
                "whitening": "zca",
            },
            refused=frozenset({"stats.n_bootstrap", "stats.confidence", "whitening"}),
        ),  # SC-WEAT: no CI, raw vectors
    ],
    "rpam": [
        Scenario(
            ["metric=rpam", *TINY_LM, "template=tp1", "dataset=weat_ws", *STATS_BASE],
            {
                **{k: v for k, v in STATS_CHANGES.items() if k != "stats.alpha"},
                "metric.normalise": False,
                "metric.swap_gender_roles": False,
            },
        ),
        Scenario(
            ["metric=rpam", *TINY_LM, "template=tp1", "dataset=bellezza", "dataset.sample=12"],
            {"dataset.sample": 15, "metric.downstream": True},
        ),
        Scenario(
            [
                "metric=rpam",
                *TINY_LM,
                "template=tp1",
                "dataset=bellezza",
                "dataset.sample=12",
                "metric.downstream=true",
            ],
            {"metric.chat_template": False, "metric.max_new_tokens": 1},
        ),
        Scenario(
            ["metric=rpam", *TINY_LM, "template=tp1", "dataset=bellezza", "metric.group_size=2"],
            {"metric.group_size": 5},
        ),
    ],
    **{
        score: [
            Scenario(
                [f"metric={score}", *TINY_LM, "dataset=abc", "metric.tau_resamples=100"],
                {
                    "metric.tau_resamples": 200,
                    "stats.confidence": 0.5,
                    "stats.correction": "holm",
                    "metric.templates": [OTHER_CAUSAL_TEMPLATE],
                    "metric.bos": False,
                    "metric.set_transform": "log1m",
                    **({"metric.set_nan_policy": "python", "metric.solver": "optax"} if score != "set" else {}),
                    **OPTAX_CHANGES,
                },
                refused=(
                    frozenset(OPTAX_CHANGES)
                    if score == "set"
                    else frozenset({"metric.set_transform", "metric.set_nan_policy", "metric.solver", *OPTAX_CHANGES})
                ),
            ),
            *(
                [
                    Scenario(
                        ["metric=set", *SHARP_LM, "dataset=abc", "metric.set_transform=log1m"],
                        {"metric.set_nan_policy": "python"},
                    ),
                    Scenario(
                        ["metric=set", *TINY_LM, "dataset=abc", "metric.tau_resamples=100"],
                        {"metric.solver": "optax"},
                        small_abc=True,
                    ),
                    Scenario(
                        ["metric=set", *TINY_LM, "dataset=abc", "metric.tau_resamples=100", *OPTAX_BASE],
                        {k: v for k, v in OPTAX_CHANGES.items() if k != "metric.shared_delta"},
                        small_abc=True,
                    ),
                    Scenario(  # two templates: something to share
                        ["metric=set", *TINY_LM, "dataset=abc", "metric.tau_resamples=100", *OPTAX_BASE]
                        + [f"metric.templates=['{DEFAULT_TEMPLATE}','{OTHER_CAUSAL_TEMPLATE}']"],
                        {"metric.shared_delta": True},
                        small_abc=True,
                    ),
                ]
                if score == "set"
                else []
            ),
        ]
        for score in ("set", "ilps", "ilps_star")
    },
    "unstereo": [
        Scenario(
            ["metric=unstereo", *TINY_LM, "dataset=use5", "dataset.sample=12"],
            {
                "dataset.sample": 15,
                "metric.parity_preprocessing": False,
                "metric.aufc_units": "ln",
                "metric.etas": [0.3],
                "metric.threshold_log10": 10.0,
                "metric.tokens_per_batch": 512,
            },
        ),
    ],
    "ceat": [
        Scenario(
            ["metric=ceat", *TINY_LM, "metric.corpus={corpus}", "metric.n_draws=20", "metric.max_contexts=2"],
            {
                "stats.alternative": "less",
                "stats.correction": "holm",
                "metric.n_draws": 30,
                "metric.tests": ["W1"],
                "metric.layer": 0,
                "metric.max_contexts": 1,
                "metric.context_seed": 1,
                "metric.fallback": "templates",
                "metric.corpus": "{corpus2}",
            },
        ),
        Scenario(
            ["metric=ceat", *SHARP_LM, "metric.corpus={corpus}", "metric.n_draws=20", "metric.max_contexts=2"],
            {"metric.chunk": 7},
        ),
        Scenario(
            ["metric=ceat", *TINY_LM, "metric.corpus={corpus}", "metric.n_draws=20", "metric.fallback=drop"],
            {"metric.max_oov_share": 0.0},
            refused=frozenset({"metric.max_oov_share"}),
        ),  # zinnia: no context
    ],
    "wefe": [
        Scenario(
            ["metric=wefe", *STATIC[1:], "stats.n_bootstrap=100"],
            {
                "stats.n_bootstrap": 150,  # the CIs of the word bootstrap
                "stats.confidence": 0.5,
                "metric.metrics": ["rnd", "mac"],
                "metric.max_oov_share": 0.0,  # zinnia has no vector: 1 of 5 lost
                "metric.normalize": True,
                "metric.rnd_distance": "cos",
                "metric.rnsb_c": 0.1,
                "metric.rnsb_holdout": False,
                "metric.rnsb_test_share": 0.4,
                "metric.rnsb_iterations": 3,
                "metric.layer": 0,  # the contextual options: refused for static vectors
                "metric.max_contexts": 2,
                "metric.fallback": "templates",
                "metric.corpus": "{corpus}",
            },
            refused=frozenset(
                {"metric.max_oov_share", "metric.layer", "metric.max_contexts", "metric.fallback", "metric.corpus"}
            ),
        ),
    ],
    "seat": [
        Scenario(
            ["metric=seat", *TINY_LM, *STATS_BASE],
            {
                **{k: v for k, v in STATS_CHANGES.items() if k != "stats.exact_bound"},
                "stats.unit": "word",  # the CI resamples words with their sentences
                "metric.layer": 0,
                "metric.pooling": "mean",
            },
            refused=frozenset({"stats.alpha"}),  # no whitening, no change class
        ),
        Scenario(  # 2 pronouns x 4 templates per target set: C(16, 8) = 12,870 partitions
            ["metric=seat", *TINY_LM, *STATS_BASE, "dataset=custom_weat", "dataset.X=[he,she]", "dataset.Y=[him,his]"]
            + ["dataset.A=[love,peace]", "dataset.B=[war,pain]"],
            {"stats.exact_bound": 20_000},
        ),
    ],
    "intersectional": [
        Scenario(
            [
                "metric=intersectional",
                *TINY_LM,
                "dataset=abc",
                "metric.groups=[Black person,woman,teenager,doctor]",
                "metric.traits=[warm,cold,powerful,powerless]",
                "metric.top_k=5",
            ],
            {
                "metric.score": "ilps",
                "metric.template": OTHER_CAUSAL_TEMPLATE,
                "metric.groups": ["Black person", "woman", "doctor"],
                "metric.traits": ["warm", "cold", "powerful"],
                "metric.trait_level": "pair",
                "metric.top_k": 3,
                "metric.dominance_threshold": 2.0,
                "metric.bos": False,
                "metric.set_transform": "log1m",
            },
        ),
        Scenario(
            [
                "metric=intersectional",
                *SHARP_LM,
                "dataset=abc",
                "metric.groups=[Black person,woman,teenager,doctor]",
                "metric.traits=[warm,cold,powerful,powerless]",
                "metric.set_transform=log1m",
            ],
            {"metric.set_nan_policy": "python"},
        ),
    ],
}
FAST = {"weat": [0]}  # scenario indices of the default (not slow) subset (weat-3, ~27 s: slow, issue 38)


@pytest.fixture(scope="module", autouse=True)
def hydra_context():
    yield from start_hydra()


def _tiny_gpt2(root, tiny_checkpoint):
    folder = tiny_checkpoint("gpt2", n_positions=512, into=root)  # the rating prompt with its chat template
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)  # a chat template for the rating task
    tokenizer.chat_template = "{% for m in messages %}User: {{ m['content'] }}\n{% endfor %}Assistant:"
    tokenizer.save_pretrained(folder)
    return folder


def _sharp_gpt2(root, tiny_checkpoint):
    """A tiny GPT-2 with 10x embeddings (tied head): large logit gaps, so some SeT distances exceed 1 and
    set_transform=log1m gives NaN scores, where set_nan_policy matters; its contextual vectors also vary
    more, so CEAT's effect sizes are better conditioned."""
    folder = tiny_checkpoint("gpt2", n_positions=256, into=root)  # a private copy: its weights are scaled
    weights = load_file(folder / "model.safetensors")
    weights["transformer.wte.weight"] = weights["transformer.wte.weight"] * 10
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


class Paths(dict):
    """The inputs a scenario's ``{placeholders}`` name, each made on first use."""

    def __init__(self, root, tiny_checkpoint):
        super().__init__()
        self.makers = {
            "glove": lambda: write_tiny_glove(root / "glove.txt"),
            "gpt2": lambda: _tiny_gpt2(root, tiny_checkpoint),
            "gpt2sharp": lambda: _sharp_gpt2(root / "sharp", tiny_checkpoint),
            "cache": lambda: root / "cache",
            "corpus": lambda: write_corpus(root / "corpus.txt"),
            "corpus2": lambda: write_corpus(root / "corpus2.txt", [s.replace("the", "a") for s in CORPUS[::-1]]),
        }

    def __missing__(self, key):
        self[key] = self.makers[key]()
        return self[key]


@pytest.fixture(scope="module")
def paths(tmp_path_factory, tiny_checkpoint):
    return Paths(tmp_path_factory.mktemp("options"), tiny_checkpoint)


def _override(key: str, value, paths) -> str:
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, list):
        text = "[" + ",".join(f"'{v}'" if isinstance(v, str) else str(v) for v in value) + "]"
    elif isinstance(value, str) and (" " in value or "<" in value):
        text = f"'{value}'"
    else:
        text = str(value)
    return f"{key}={text}".format_map(paths)


def _echo_columns() -> set[str]:
    fields = {f.name for f in dataclasses.fields(StatsConfig)}
    for spec in METRICS.values():
        fields |= {f.name for f in dataclasses.fields(spec.config)}
    return fields | {"whitening", "measure", "abc_template"}


def outcome(overrides: list[str], tmp_path) -> pd.DataFrame | JaxassocError:
    """The job's result tables (setting echoes dropped), or the error that refused it."""
    try:
        result = run_metric(overrides, tmp_path)
    except JaxassocError as e:
        return e
    echo = _echo_columns()
    tables = [
        t.drop(columns=[c for c in t.columns if c in echo]).reset_index(drop=True).assign(table=name)
        for name, t in (("items", result.items), ("aggregates", result.aggregates))
    ]
    return pd.concat(tables, ignore_index=True)


def same(a: pd.DataFrame, b: pd.DataFrame, rtol: float = 1e-6) -> bool:
    if list(a.columns) != list(b.columns) or a.shape != b.shape:
        return False
    for column in a.columns:
        x, y = a[column], b[column]
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y) and not pd.api.types.is_bool_dtype(x):
            if not np.allclose(x.to_numpy(float), y.to_numpy(float), rtol=rtol, atol=1e-12, equal_nan=True):
                return False
        elif not x.astype(str).equals(y.astype(str)):
            return False
    return True


def _affects_results(key: str, metric: str) -> bool:
    group, name = key.split(".", 1)
    cls = METRICS[metric].config if group == "metric" else GROUP_SCHEMAS[group]
    return next(f for f in dataclasses.fields(cls) if f.name == name).metadata.get("affects_results", True)


def check_scenario(metric: str, scenario: Scenario, paths, tmp_path) -> list[str]:
    """Each change of the scenario changes the result, is refused, or (declared no-effect) changes nothing."""
    base = [o.format_map(paths) for o in scenario.base]
    reference = outcome(base, tmp_path)
    assert isinstance(reference, pd.DataFrame), f"{metric}: the base run {base} failed: {reference}"
    failures = []
    for key, value in scenario.changes.items():
        changed = outcome([*base, _override(key, value, paths)], tmp_path)
        if isinstance(changed, JaxassocError) != (key in scenario.refused):
            failures.append(f"{key}={value!r}: {changed if isinstance(changed, JaxassocError) else 'not refused'}")
        elif isinstance(changed, JaxassocError):
            continue
        elif _affects_results(key, metric) == same(
            reference, changed, rtol=1e-6 if _affects_results(key, metric) else 1e-3
        ):
            what = (
                "changed nothing"
                if _affects_results(key, metric)
                else "changed the result though declared without effect"
            )
            failures.append(f"{key}={value!r} {what}")
    return failures


def declared_options(metric: str) -> set[str]:
    spec = METRICS[metric]
    keys = {f"metric.{f.name}" for f in dataclasses.fields(spec.config) if f.name != "name"}
    for f in dataclasses.fields(StatsConfig):
        key = f"stats.{f.name}"
        if spec.uses is None or key in spec.uses or "stats" in spec.uses:
            keys.add(key)
    return keys


@pytest.mark.parametrize("metric", list(SCENARIOS))
def test_every_option_is_covered_and_every_unread_stats_option_is_refused(metric, paths, tmp_path, monkeypatch):
    """Coverage of the sweep below, and the refusal of the stats options the metric does not read."""
    use_tiny_suite(monkeypatch)
    covered = {key for scenario in SCENARIOS[metric] for key in scenario.changes}
    assert declared_options(metric) <= covered, f"{metric}: no scenario changes {declared_options(metric) - covered}"
    base = [o.format_map(paths) for o in SCENARIOS[metric][0].base]
    for key, value in STATS_CHANGES.items():
        if key not in declared_options(metric):
            refused = outcome([*base, _override(key, value, paths)], tmp_path)
            assert isinstance(refused, JaxassocError) and key in str(refused), f"{metric}: {key} not refused"


CASES = [
    pytest.param(metric, i, marks=() if i in FAST.get(metric, ()) else pytest.mark.slow, id=f"{metric}-{i}")
    for metric, scenarios in SCENARIOS.items()
    for i in range(len(scenarios))
]


@pytest.mark.parametrize("metric, index", CASES)
def test_every_option_changes_the_result_or_is_refused_or_declared(metric, index, paths, tmp_path, monkeypatch):
    use_tiny_suite(monkeypatch)
    if SCENARIOS[metric][index].small_abc:
        small_abc(monkeypatch, held_out=2)
    failures = check_scenario(metric, SCENARIOS[metric][index], paths, tmp_path)
    assert not failures, f"{metric}: " + "; ".join(failures)


def test_the_comparison_tells_results_apart():
    a = pd.DataFrame({"d": [0.5, math.nan], "change": ["Stable", "Undefined"]})
    assert same(a, a.copy())
    assert not same(a, a.assign(d=[0.5000001, 1.0]))
    assert not same(a, a.assign(change=["Stable", "Emerging"]))
    assert not same(a, a.iloc[:1])
