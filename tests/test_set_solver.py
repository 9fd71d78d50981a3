"""``metric.solver=optax`` for SeT (docs/methods.md §3.6): on the ABC suite with a tiny causal model the optax
solver gives the exact solver's distances within rtol 1e-3 (and every problem converges), at the function
level and through the app on an 8-device mesh; its options are checked and refused by name; with
``shared_delta`` one ΔA per (group, word, subword) serves every template, checked on the ΔA itself."""

import logging

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from app_helpers import run_metric, small_abc, start_hydra

from jaxassoc import data
from jaxassoc.app.tasks import stereotypes as task
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.set_exact import MARGIN
from jaxassoc.metrics.set_optax import SolverSettings, set_optax, set_optax_update
from jaxassoc.models import load_model
from jaxassoc.readouts.stereotypes_shared import template_head_inputs
from jaxassoc.suites.stereotypes import OptaxOptions, score_causal
from jaxassoc.suites.stereotypes_shared import shared_set_scores

RTOL = 1e-3  # optax vs exact on ‖ΔA‖_F, the tolerance docs/methods.md §3.6 states
TOL = 1e-3  # the converged rule's violation tolerance (logit units), metric.optax_tolerance's default
TEMPLATES = ["Most <pgroup> are <mask>.", "The <sgroup> is <mask>."]
GROUPS = ["Black person", "woman", "Asian person", "immigrant"]
WORDS = ["powerful", "powerless", "warm", "cold", "self-assured"]
OPTAX = OptaxOptions(SolverSettings(), TOL)

hydra_context = pytest.fixture(start_hydra)


@pytest.fixture(scope="module")
def folder(tiny_checkpoint):
    return tiny_checkpoint("llama", 3, max_position_embeddings=128)


@pytest.fixture(scope="module")
def model(folder):
    return load_model(folder)


@pytest.mark.slow  # ~8 s (issue 38: the default suite's budget)
def test_optax_scores_match_the_exact_solver_on_abc_prompts(model):
    abc = data.load_abc()
    common = dict(groups=["Black people", "women", "Asian people"], words=WORDS, bos=True)
    exact = score_causal(model, abc, TEMPLATES[0], **common)
    optax = score_causal(model, abc, TEMPLATES[0], **common, set_optax=OPTAX)
    for column in ("set", "set_distance_max"):
        np.testing.assert_allclose(optax[column], exact[column], rtol=RTOL, atol=1e-6)
    pd.testing.assert_frame_equal(
        optax[["group", "word", "ilps", "ilps_star"]], exact[["group", "word", "ilps", "ilps_star"]]
    )
    assert (optax["set_converged"] == optax["set_problems"]).all()
    assert (optax["prior_set_converged"] == optax["prior_set_problems"]).all()
    assert (optax["set_problems"] >= 1).all() and (optax["set_max_violation"] <= TOL).all()
    assert optax["set_problems"].max() > 1  # a multi-subword trait: several problems behind one row
    assert "set_converged" not in exact


def optax_run(folder, cache, *extra):
    return [
        "metric=set",
        "dataset=abc",
        f"model.source={folder}",
        "model.name=tiny",
        "model.kind=causal",
        "model.batch_size=16",
        f"cache_dir={cache}",
        "metric.tau_resamples=100",
        *extra,
    ]


@pytest.mark.slow  # about 4 min on 2 busy cores: two jobs, the sharded solver compiled for 8 devices
def test_app_optax_solver_on_a_mesh_matches_exact_and_reports_convergence(folder, tmp_path, hydra_context, monkeypatch):
    small_abc(monkeypatch, held_out=2)
    cache = tmp_path / "cache"
    exact = run_metric(optax_run(folder, cache), tmp_path / "out")
    optax = run_metric(optax_run(folder, cache, "metric.solver=optax", "mesh=data"), tmp_path / "out")
    stored = [dict(np.load(f, allow_pickle=True)) for f in sorted((cache / "stereotype_scores").glob("*.npz"))]
    assert len(stored) == 2  # one entry per solver: the optax run did not read the exact one
    by_solver = {("set_converged" in s): s for s in stored}
    np.testing.assert_allclose(by_solver[True]["set"], by_solver[False]["set"], rtol=RTOL, atol=1e-6)

    row = optax.aggregates.iloc[0]
    assert row["set_problems"] > 0 and row["set_converged"] == row["set_problems"]
    assert row["set_max_violation"] <= TOL
    assert {"set_problems", "set_converged", "set_max_violation"} <= set(optax.items.columns)
    assert (optax.items["set_converged"] == optax.items["set_problems"]).all()
    assert "set_problems" not in exact.aggregates and "set_problems" not in exact.items
    assert optax.provenance["set_solver"].startswith("optax") and exact.provenance["set_solver"].startswith("exact")
    note = " ".join(task.views(optax.aggregates)[0][1].attrs["notes"])
    assert f"{int(row['set_converged']):,} of {int(row['set_problems']):,} problems converged" in note


@pytest.mark.parametrize(
    "override, message",
    [
        ("metric.solver=foo", r"metric.solver='foo' is not supported: use one of exact, optax"),
        ("metric.optax_tolerance=0", r"metric.optax_tolerance=0.0 is out of range: it must be > 0"),
        ("metric.optax_outer_steps=0", r"metric.optax_outer_steps=0 is out of range: it must be >= 1"),
        ("metric.shared_delta=true", r"metric.shared_delta=True has no effect .*metric.solver=optax only"),
        ("metric.optax_inner_steps=5", r"metric.optax_inner_steps=5 has no effect .*metric.solver=optax only"),
    ],
)
def test_bad_or_unused_solver_options_are_refused_by_name(folder, tmp_path, hydra_context, override, message):
    with pytest.raises(ConfigError, match=message):
        run_metric(optax_run(folder, tmp_path / "cache", override), tmp_path / "out")


def test_solver_options_are_refused_for_ilps_and_shared_delta_for_one_template(folder, tmp_path, hydra_context):
    overrides = optax_run(folder, tmp_path / "cache", "metric.solver=optax")
    with pytest.raises(ConfigError, match=r"metric.solver='optax' has no effect with metric=ilps.*SeT's solver only"):
        run_metric(["metric=ilps", *overrides[1:]], tmp_path / "out")
    with pytest.raises(ConfigError, match=r"metric.shared_delta=True has no effect.*one template leaves nothing"):
        run_metric([*overrides, "metric.shared_delta=true"], tmp_path / "out")


@pytest.mark.slow  # about 75 s on 2 busy cores: three compilations of the L-BFGS solve
def test_shared_delta_satisfies_every_templates_constraint(model):
    """The ΔA of one (group, word, subword) problem, rebuilt with set_optax_update from the model's head
    inputs in both templates, makes the gold win each template's context by the margin; its norm is the
    problem's distance; and shared_set_scores reports that distance for the row."""
    abc = data.load_abc()
    head = model.head
    inputs = [template_head_inputs(model, abc, t, GROUPS, WORDS, bos=True, batch_size=16) for t in TEMPLATES]
    n = 0  # the first group's first word, its first subword, in each template
    x = np.stack([xk[n, 0] for xk, _, _ in inputs])
    gold = np.array([tk[n, 0] for _, tk, _ in inputs])
    valid = np.ones(len(TEMPLATES), bool)
    dW, db = set_optax_update(head.W, head.b, jnp.asarray(x), jnp.asarray(gold), jnp.asarray(valid))
    logits = x @ (np.asarray(head.W) + np.asarray(dW)).T
    if head.b is not None:
        logits = logits + np.asarray(head.b) + np.asarray(db)
    for k, j in enumerate(gold):
        rivals = np.delete(logits[k], j)
        assert logits[k, j] - rivals.max() >= MARGIN - TOL, f"template {k}: the gold does not win by the margin"
    norm = np.sqrt(np.sum(np.asarray(dW) ** 2) + (0.0 if db is None else np.sum(np.asarray(db) ** 2)))
    solved = set_optax(head.W, head.b, x[None], gold[None], valid[None])
    assert norm == pytest.approx(float(solved.distance[0]), rel=RTOL)
    assert norm > 0 and float(solved.max_violation[0]) <= TOL

    scores = shared_set_scores(model, abc, TEMPLATES, OPTAX, groups=GROUPS, words=WORDS, bos=True, batch_size=16)
    assert list(scores.group.unique()) == GROUPS and (scores["set_converged"] == scores["set_problems"]).all()
    largest = float(scores["set_distance_max"].iloc[0])  # the row's largest shared distance over its subwords
    if all(vk[n].sum() == 1 for _, _, vk in inputs):
        assert largest == pytest.approx(norm, rel=RTOL)
    else:
        assert largest >= norm * (1 - RTOL)


@pytest.mark.slow
def test_app_shared_delta_over_two_templates(folder, tmp_path, hydra_context, monkeypatch):
    from jaxassoc.app.tasks import stereotypes

    small_abc(monkeypatch, held_out=1)  # pole words, the 4 pilot groups and one held-out group, of 25
    templates = "metric.templates=[" + ",".join(f"'{t}'" for t in TEMPLATES) + "]"
    result = run_metric(
        optax_run(folder, tmp_path / "cache", "metric.solver=optax", "metric.shared_delta=true", templates),
        tmp_path / "out",
    )
    row = result.aggregates.iloc[0]
    assert row["template"] == "shared ΔA over 2 templates" and len(result.aggregates) == 1
    assert [name for name, _ in stereotypes.views(result.aggregates)] == ["per template", "held-out groups"]
    assert row["set_converged"] == row["set_problems"] > 0
    assert "one ΔA shared by the templates" in result.provenance["set_solver"]


def test_a_template_whose_set_problems_did_not_all_converge_is_warned_about_and_marked(caplog):
    caplog.set_level(logging.WARNING, logger="jaxassoc")
    converged = {"set_problems": 256, "set_converged": 244, "set_max_violation": 0.05}
    caveat = task.unconverged_caveat("t1", converged)
    assert caveat == "τ and P@3 rest on 12 of 256 SeT problems that did not converge (worst violation 0.05 logit units)"
    assert [r.getMessage() for r in caplog.records] == [
        f"set: template 't1': {caveat}; raise metric.optax_outer_steps / metric.optax_inner_steps, or use "
        "metric.solver=exact"
    ]
    assert task.unconverged_caveat("t1", {**converged, "set_converged": 256}) == ""
    assert task.unconverged_caveat("t1", None) == ""  # the exact solver
    rows = pd.DataFrame([{"template": "t1", "kendall_tau_overall": 0.3, **converged, "caveat": caveat}])
    shown = task.views(rows)[0][1]
    assert shown["caveat"].tolist() == [caveat]  # the table marks the statistics that rest on it
