"""The examples run as scripts on a tiny GPT-2 checkpoint, and their numbers match independent references:
the app's own RPAM host side (``rpam_inputs``), NumPy re-computations, and torch/transformers for the
perplexity; the plugin metric is swept through the ``jaxassoc`` CLI. Scripts and CLI run in process (a script
as ``python script.py ...`` runs it: ``__main__``, its ``sys.argv`` and working folder)."""

import json
import re
import runpy
import sys
from pathlib import Path

import family_specs
import numpy as np
import pandas as pd
import pytest
import torch
from app_helpers import use_plugins
from tolerances import EPS32, f32_chain, f32_effect_size, f32_log_softmax, f32_sum

from jaxassoc.models import load_model
from jaxassoc.readouts import rpam_head
from jaxassoc.readouts.rpam_prompts import rpam_inputs, tokenize_attributes

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    # initializer_range 0.5 (HF default 0.02): logits then vary by O(1) across targets, so the attribute
    # probabilities' differences s(t) are of the order of the probabilities themselves. With the default, s(t) is
    # ~1e-3 of p and d is a ratio of cancelling float32 differences whose 4th digit depends on the CPU's kernels.
    return tiny_checkpoint("gpt2", initializer_range=0.5)


@pytest.fixture(scope="module")
def tiny_model(tiny):
    return load_model(tiny)


@pytest.fixture
def run_example(monkeypatch, capsys):
    """``run_example(script, *args, cwd=...)``: the script's output after running it as ``__main__`` with
    ``sys.argv = [script, *args]``, ``examples/`` first on ``sys.path`` and ``cwd`` as working folder (a failure
    raises)."""

    def run(script, *args, cwd):
        capsys.readouterr()
        with monkeypatch.context() as patch:
            patch.setattr(sys, "argv", [str(EXAMPLES / script), *map(str, args)])
            patch.syspath_prepend(str(EXAMPLES))  # the script's folder, as python puts it first
            patch.delitem(sys.modules, "rpam_logratio", raising=False)  # imported afresh, as in a new process
            patch.chdir(cwd)
            runpy.run_path(str(EXAMPLES / script), run_name="__main__")
        return capsys.readouterr().out

    return run


def app_probabilities(model, spec):
    """p(v, t) from the app's RPAM host side, computed in NumPy from its raw logits."""
    inputs = rpam_inputs(
        model, spec.x + spec.y, tokenize_attributes(model.tokenizer, spec.a + spec.b, rpam_head.TP1), rpam_head.TP1
    )
    logits = inputs.first_logits.astype(np.float64)  # the reference in float64: only the model runs in float32
    z = logits - logits.max(axis=1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=1, keepdims=True) * inputs.continuation, inputs


def logit_tol(inputs) -> float:
    """The first-token logits of two float32 programs (the app's, an example's) on the tiny GPT-2: 2 layers +
    the head, inner 128, scaled by the logits: f32_chain(3, 128, max|logit|)."""
    return f32_chain(3, 128, float(np.abs(inputs.first_logits).max()))


def p_rtol(inputs) -> float:
    """p's relative error: a softmax over C of logits within logit_tol (2·logit_tol + the sum over C), times
    a continuation factor, a mean of full-vocabulary probabilities (f32_log_softmax over the vocabulary)."""
    tol = logit_tol(inputs)
    n_c = inputs.first_logits.shape[1]
    vocab = 320  # the tiny tokenizer's
    log_p = f32_log_softmax(vocab, tol, np.log(vocab) + 2 * float(np.abs(inputs.first_logits).max()))
    return float(np.expm1(2 * tol + f32_sum(n_c, 1 / n_c) + log_p))


def s_tol(p, n_a, inputs) -> float:
    """s = mean_A p - mean_B p, absolute: each p within p_rtol, two means and a difference."""
    top, n_b = float(p.max()), p.shape[1] - n_a
    return (p_rtol(inputs) + f32_sum(1, 1.0)) * top + f32_sum(n_a, top / n_a) + f32_sum(n_b, top / n_b)


def d_tol(p, s, n_a, n_x, inputs) -> float:
    """d from s within s_tol: f32_effect_size (replaces a measured 1e-5: C6 3e-7, C9 7e-7 observed)."""
    return f32_effect_size(s_tol(p, n_a, inputs), s, numpy_d(s, n_x))


def log_ratio_d_tol(p, s_log, n_a, n_x, inputs) -> float:
    """d of the log-ratio scores log mean_A p - log mean_B p: each log within p_rtol plus its mean's rounding
    (positive terms, relative), two of them; then f32_effect_size."""
    n = max(n_a, p.shape[1] - n_a)
    return f32_effect_size(2 * (p_rtol(inputs) + f32_sum(n, 1 / n)), s_log, numpy_d(s_log, n_x))


def numpy_d(s, n_x):
    return (s[:n_x].mean() - s[n_x:].mean()) / s.std(ddof=1)


def test_head_rpam_reproduces_the_app_inputs(tiny_model):
    spec = rpam_head.weat_ws_tests()["C7"]
    first, cont = rpam_head.head_rpam_inputs(tiny_model.head, rpam_head.rpam_test_states(tiny_model, spec))
    _, inputs = app_probabilities(tiny_model, spec)
    assert inputs.n_multi_token > 0
    # two float32 programs: logit_tol; the continuation factors, means of probabilities, relative
    # expm1(f32_log_softmax) each
    np.testing.assert_allclose(np.asarray(first), inputs.first_logits, rtol=0, atol=logit_tol(inputs))
    np.testing.assert_allclose(np.asarray(cont), inputs.continuation, rtol=p_rtol(inputs), atol=0)


@pytest.mark.slow
def test_attribution_table_and_d(tiny, tiny_model, tmp_path, run_example):
    out = run_example("attribution.py", "--model", tiny, "--test", "C6", "--top", "4", "--json", "a.json", cwd=tmp_path)
    assert "Attribute words ranked" in out and "Target words ranked" in out
    result = json.loads((tmp_path / "a.json").read_text())
    spec = rpam_head.weat_ws_tests()["C6"]
    p, inputs = app_probabilities(tiny_model, spec)
    s = p[:, : len(spec.a)].mean(axis=1) - p[:, len(spec.a) :].mean(axis=1)
    tol = d_tol(p, s, len(spec.a), len(spec.x), inputs)
    np.testing.assert_allclose(result["d"], numpy_d(s, len(spec.x)), rtol=0, atol=tol)
    attributes, targets = pd.DataFrame(result["attributes"]), pd.DataFrame(result["targets"])
    assert sorted(attributes["attribute"]) == sorted(spec.a + spec.b)
    assert sorted(targets["target"]) == sorted(spec.x + spec.y)
    assert (np.diff(attributes["grad_norm"]) <= 0).all() and (attributes["grad_norm"] > 0).all()
    got_s = targets.set_index("target").loc[list(spec.x + spec.y), "s"]
    np.testing.assert_allclose(got_s, s, rtol=0, atol=s_tol(p, len(spec.a), inputs))
    # ∂d/∂s sums to 0 (d is shift-invariant in s) and sign-separates X from Y when d is small: in float32 each
    # term carries the ~10 roundings of the mean's and the std's backward pass (5·EPS32 relative), then a sum
    # of n (atol=1e-3·max had been ~100x that)
    n, top = len(targets), float(targets["dd_ds"].abs().max())
    np.testing.assert_allclose(targets["dd_ds"].sum(), 0.0, atol=5 * EPS32 * n * top + f32_sum(n, top))


@pytest.mark.slow
def test_mitigation_shrinks_d_and_reports_perplexity(tiny, tiny_model, tmp_path, run_example):
    out = run_example(
        "mitigation.py",
        "--model",
        tiny,
        "--test",
        "C6",
        "--heldout",
        "C9",
        "--steps",
        "4",
        "--lr",
        "1e-3",
        "--n-lm",
        "6",
        "--n-eval",
        "6",
        "--max-tokens",
        "30",
        "--json",
        "m.json",
        cwd=tmp_path,
    )
    assert "perplexity (heldout sentences)" in out
    result = json.loads((tmp_path / "m.json").read_text())
    table = pd.DataFrame(result["table"]).set_index("test")
    assert list(table.index) == ["C6", "C9"] and table.loc["C6", "trained"] and not table.loc["C9", "trained"]
    assert abs(table.loc["C6", "d_after"]) < abs(table.loc["C6", "d_before"])
    for tid in ("C6", "C9"):  # "before" is the untouched model's RPAM d
        spec = rpam_head.weat_ws_tests()[tid]
        p, inputs = app_probabilities(tiny_model, spec)
        s = p[:, : len(spec.a)].mean(axis=1) - p[:, len(spec.a) :].mean(axis=1)
        tol = d_tol(p, s, len(spec.a), len(spec.x), inputs)
        np.testing.assert_allclose(table.loc[tid, "d_before"], numpy_d(s, len(spec.x)), rtol=0, atol=tol)
    # perplexity before fine-tuning, against transformers on the same sentences (no BOS: GPT-2's default)
    reference = family_specs.load_torch("gpt2", tiny)
    nll, count = 0.0, 0
    with torch.no_grad():
        for sentence in result["lm_sentences"]:
            ids = torch.tensor([tiny_model.tokenizer(sentence)["input_ids"]])
            logp = torch.log_softmax(reference(ids).logits[0, :-1].double(), dim=-1)
            nll -= logp.gather(1, ids[0, 1:, None]).sum().item()
            count += ids.shape[1] - 1
    # exp of a mean log p: each within f32_log_softmax(320, f32_chain(3, 128, |logits|), ·) vs torch; for
    # initializer_range 0.5 the logits reach ~10: ~3e-5 relative, rtol=1e-4
    np.testing.assert_allclose(result["ppl_lm_before"], np.exp(nll / count), rtol=1e-4)
    assert result["n_lm_tokens"] == count and 0 < result["rows_changed"] <= result["n_trainable_rows"]
    assert result["rows"] == "attributes"


@pytest.mark.slow  # a sweep through the example: ~6 s (issue 38: the default suite's budget)
def test_custom_metric_script(tiny, tiny_model, tmp_path, run_example):
    out = run_example("custom_metric.py", "--model", tiny, "--test", "C9", cwd=tmp_path)
    spec = rpam_head.weat_ws_tests()["C9"]
    p, inputs = app_probabilities(tiny_model, spec)
    s_log = np.log(p[:, : len(spec.a)].mean(axis=1)) - np.log(p[:, len(spec.a) :].mean(axis=1))
    printed = dict(re.findall(r"(log-ratio d|RPAM d) = ([+-][0-9.]+)", out.splitlines()[0]))
    s = p[:, : len(spec.a)].mean(axis=1) - p[:, len(spec.a) :].mean(axis=1)
    # printed to 4 decimals: within half a unit of the last digit (plus the float32 error) of the reference
    log_tol = log_ratio_d_tol(p, s_log, len(spec.a), len(spec.x), inputs)
    np.testing.assert_allclose(float(printed["log-ratio d"]), numpy_d(s_log, len(spec.x)), atol=5e-5 + log_tol)
    tol = d_tol(p, s, len(spec.a), len(spec.x), inputs)
    np.testing.assert_allclose(float(printed["RPAM d"]), numpy_d(s, len(spec.x)), atol=5e-5 + tol)


@pytest.mark.slow  # the default suite sweeps a plugin metric in tests/test_app.py
def test_plugin_metric_sweeps_through_the_cli(tiny, tiny_model, tmp_path, cli, monkeypatch):
    env = {**use_plugins(monkeypatch, "rpam_logratio", folder=EXAMPLES), "HYDRA_FULL_ERROR": "0"}
    cmd = [
        "-m",
        "metric=rpam_logratio",
        f"model.source={tiny}",
        "model.name=tiny",
        "model.kind=causal",
        "dataset=weat_ws",
        "template=tp1",
        "metric.tests=[C7,C9]",
        "metric.swap_gender_roles=true,false",
        "stats.n_permutations=2000",
        "cache_dir=null",
        "hydra.sweep.dir=sweep",
    ]
    proc = cli("jaxassoc", *cmd, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(p.parent for p in (tmp_path / "sweep").rglob("results.json"))
    assert len(jobs) == 2
    swaps = []
    for job in jobs:
        agg = pd.read_parquet(job / "aggregates.parquet").set_index("test")
        swap = json.loads((job / "results.json").read_text())["provenance"]["config"]["metric"]["swap_gender_roles"]
        assert (agg["swap_gender_roles"] == swap).all()
        swaps.append(swap)
        assert list(agg.index) == ["C7", "C9"] and (agg["prov_model"] == "tiny").all()
        specs = rpam_head.weat_ws_tests(swap_gender_roles=swap)
        for tid in ("C7", "C9"):
            p, inputs = app_probabilities(tiny_model, specs[tid])
            n_a = len(specs[tid].a)
            s_log = np.log(p[:, :n_a].mean(axis=1)) - np.log(p[:, n_a:].mean(axis=1))
            tol = log_ratio_d_tol(p, s_log, n_a, len(specs[tid].x), inputs)
            np.testing.assert_allclose(agg.loc[tid, "effect_size"], numpy_d(s_log, len(specs[tid].x)), rtol=0, atol=tol)
            assert 0.0 <= agg.loc[tid, "p_value"] <= 1.0
    assert sorted(swaps) == [False, True]
