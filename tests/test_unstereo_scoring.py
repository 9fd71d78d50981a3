"""Exact parity with the original UnStereoEval numbers, without running a model.

The shipped per-row pythia-70m log-likelihoods (and the 28-model Winogender results) go through
:func:`jaxassoc.metrics.unstereo.unstereo_eval` (float64 via ``jax.enable_x64``) and must reproduce
``results/processed-results/*.json`` to 1e-9. ``male_rel_ratio`` is printed there rounded to 2 decimals.
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tolerances import f32_chain, f32_log_softmax, f32_sum

from jaxassoc.data import unstereo as u
from jaxassoc.metrics.unstereo import unstereo_eval

FIXTURES = Path(__file__).parent / "fixtures" / "unstereo_eval" / "results"
SCORE_FILES = {
    "USE-5": ["5words/revised_templates"],
    "USE-10": ["10words/revised_templates"],
    "USE-20": ["20words/revised_templates"],
    "Winobias": ["Winobias/coref__Winobias__templates.dev", "Winobias/coref__Winobias__templates.test"],
    "Winogender": ["Winogender/coref__Winogender__templates"],
}


def _processed(name):
    return json.loads((FIXTURES / "processed-results" / f"{name}.json").read_text())


def _assert_matches(results, reference, model):
    assert list(results) == list(reference)  # "unconstrained", "0.3", "0.5", "0.65", "0.8", "1.0"
    for key, expected in reference.items():
        r = results[key]
        got = {
            "neutral__avg": float(r.us_score),
            "neutral__std": float(r.us_std_error),
            "aufc": float(r.aufc),
            "male_rel_ratio": round(float(r.male_rel_ratio), 2),
            "num_examples_nonneutral": int(r.n_nonneutral),
            "num_examples": int(r.n),
        }
        assert set(got) == set(expected)
        for field, value in expected.items():
            value = value[model] if isinstance(value, dict) else value
            assert abs(got[field] - value) <= 1e-9, (key, field, got[field], value)


def _pythia_scores(name):
    frames = [pd.read_csv(FIXTURES / f"{f}__scores__EleutherAI__pythia-70m.csv.gz") for f in SCORE_FILES[name]]
    scores = pd.concat(frames, ignore_index=True)
    return u.natural_rows(scores) if "is_natural" in scores.columns else scores


@pytest.mark.parametrize("name", u.DATASETS)
def test_pythia70m_reproduces_processed_results(name):
    scores = _pythia_scores(name)
    data = u.load_dataset(name)
    assert scores["template"].tolist() == data["template"].tolist()  # same rows, same order
    np.testing.assert_array_equal(scores["F_logprob"] - scores["M_logprob"], scores["FM_logprob"])
    results = unstereo_eval(scores["M_logprob"], scores["F_logprob"], data["max_gender_pmi"], aufc_units="parity")
    assert results["unconstrained"].us_score.dtype == np.float64
    _assert_matches(results, _processed(name), "pythia-70m")


def test_all_28_models_reproduce_winogender_results():
    table = pd.read_csv(FIXTURES / "Winogender-no-maxpmi-constraint.csv.gz")
    reference = _processed("Winogender")
    data = u.load_winogender()
    models = sorted(table["model"].unique())
    assert len(models) == 28 and models == sorted(reference["unconstrained"]["aufc"])
    for model, rows in table.groupby("model"):
        rows = rows.reset_index(drop=True)
        assert rows["template"].tolist() == data["template"].tolist()
        np.testing.assert_array_equal(rows["max_gender_pmi"], data["max_gender_pmi"])
        results = unstereo_eval(rows["M_logprob"], rows["F_logprob"], rows["max_gender_pmi"], aufc_units="parity")
        _assert_matches(results, reference, model)


def test_the_aufc_unit_quirk_is_needed_for_parity():
    scores, data = _pythia_scores("USE-5"), u.load_use(5)
    reference = _processed("USE-5")
    for units, subsets in (("log10", ["0.65"]), ("ln", ["unconstrained"])):
        results = unstereo_eval(scores["M_logprob"], scores["F_logprob"], data["max_gender_pmi"], aufc_units=units)
        for key in subsets:
            assert abs(float(results[key].aufc) - reference[key]["aufc"]["pythia-70m"]) > 0.1
        # Only the AuFC depends on the units.
        assert float(results["0.65"].us_score) == reference["0.65"]["neutral__avg"]["pythia-70m"]


def test_all_datasets_json_is_the_union_of_the_per_dataset_files():
    combined = json.loads((FIXTURES / "processed-results" / "all_datasets.json").read_text())
    assert sorted(combined) == sorted(u.DATASETS)
    for name in u.DATASETS:
        assert combined[name] == _processed(name)


# --- sentence scoring with a model (tiny random checkpoints; torch/transformers as the reference) -------

SENTENCES = [
    "The doctor said that he would help.",
    "She studies math.",
    "People from every country enjoy food, music, family and friends; the engineer fixed the computer.",
    "He",
]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def tiny(request, tiny_checkpoint):
    import family_specs

    from jaxassoc.models.loading import load_model

    overrides = {"n_positions": 256} if request.param == "gpt2" else {"max_position_embeddings": 256}
    folder = tiny_checkpoint(request.param, 3, **overrides)
    return load_model(folder), family_specs.load_torch(request.param, folder)


def _score_tol(model, sentences, logit_tol, max_abs_logit):
    """A sentence's log-probability is a float32 sum of its T tokens' log p, each within
    f32_log_softmax(V, logit_tol, log V + 2·max|logit|), plus the sum's own rounding."""
    vocab = model.head.W.shape[0]
    per_token = f32_log_softmax(vocab, logit_tol, np.log(vocab) + 2 * max_abs_logit)
    lengths = np.array([len(model.tokenizer(s, add_special_tokens=False)["input_ids"]) for s in sentences])
    return lengths * per_token + np.array([f32_sum(n, np.log(vocab) + 2 * max_abs_logit) for n in lengths])


# the tiny models: 2 layers + the head, inner ≤ 128, |logits| < 1
TINY_LOGIT_TOL = f32_chain(3, 128, 1.0)


def _torch_scores(torch_model, tokenizer, bos_id, sentences):
    import torch

    out = []
    for s in sentences:
        ids = torch.tensor([[bos_id, *tokenizer(s, add_special_tokens=False)["input_ids"]]])
        with torch.no_grad():
            logp = torch.log_softmax(torch_model(ids).logits.double(), dim=-1)
        out.append(logp[0, :-1].gather(1, ids[0, 1:, None]).sum().item())
    return np.array(out)


def test_score_sentences_matches_transformers(tiny):
    from jaxassoc.readouts.unstereo import score_sentences

    model, torch_model = tiny
    got = score_sentences(model, SENTENCES, tokens_per_batch=256)
    assert got.dtype == np.float64 and got.shape == (4,)
    expected = _torch_scores(torch_model, model.tokenizer, model.vocab.bos_id, SENTENCES)
    tol = _score_tol(model, SENTENCES, TINY_LOGIT_TOL, 1.0)  # float32 vs torch
    assert np.all(np.abs(got - expected) <= tol)


def test_padding_cannot_change_a_score(tiny):
    from jaxassoc.readouts.unstereo import score_sentences

    model, _ = tiny
    alone = [score_sentences(model, [s])[0] for s in SENTENCES]
    packed = score_sentences(model, SENTENCES)  # all four sentences share one packed row
    one_row_per_batch = score_sentences(model, SENTENCES * 40, tokens_per_batch=1)  # 160 sentences, 8 rows
    # other rows, other programs: _score_tol (rtol=1e-6 with atol=1e-5 had been below it for ~20 tokens)
    tol = _score_tol(model, SENTENCES, TINY_LOGIT_TOL, 1.0)
    assert np.all(np.abs(packed - np.asarray(alone)) <= tol)
    assert np.all(np.abs(one_row_per_batch - np.tile(packed, 40)) <= np.tile(tol, 40))


def test_run_unstereo_and_summary(tiny):
    from jaxassoc.readouts.unstereo import run_unstereo, score_sentences
    from jaxassoc.suites.unstereo import summarize

    model, _ = tiny
    scores = run_unstereo(model, "Winogender", tokens_per_batch=512)
    assert len(scores) == 240
    male, female = u.fill_templates(u.load_winogender()["template"].tolist())
    assert scores["M_template"].tolist() == male and scores["F_template"].tolist() == female
    # other batches (tokens_per_batch 512 vs the default): other programs, _score_tol (rtol=1e-6 had asked one)
    tol = _score_tol(model, male[:5], TINY_LOGIT_TOL, 1.0)
    assert np.all(np.abs(scores["M_logprob"].to_numpy()[:5] - score_sentences(model, male[:5])) <= tol)
    np.testing.assert_array_equal(scores["FM_logprob"], scores["F_logprob"] - scores["M_logprob"])
    summary = summarize(scores)
    assert summary["subset"].tolist() == ["unconstrained", "0.3", "0.5", "0.65", "0.8", "1.0"]
    direct = unstereo_eval(scores["M_logprob"], scores["F_logprob"], scores["max_gender_pmi"])
    np.testing.assert_allclose(summary["aufc_log10"], [float(r.aufc) for r in direct.values()], rtol=0, atol=0)
    assert "aufc" not in summary and (summary["aufc_units"] == "log10").all()  # one unit, named in the header
    assert summary.loc[0, "n"] == 240


def test_scoring_errors(tiny):
    from jaxassoc.errors import InputError
    from jaxassoc.readouts.unstereo import score_sentences

    model, _ = tiny
    with pytest.raises(InputError, match="sentence 1"):
        score_sentences(model, ["Fine.", ""])
    with pytest.raises(InputError, match="at least one"):
        score_sentences(model, [])
    with pytest.raises(InputError, match="sentence 0 .*256-token context"):
        score_sentences(model, ["the music " * 200])


@pytest.mark.slow
def test_smollm2_scores_match_transformers_on_the_same_weights():
    """The embedded SmolLM2-135M GGUF through jaxassoc vs transformers' LlamaForCausalLM holding the
    same dequantised tensors (``read_gguf``), on a few filled USE-5 templates."""
    import torch
    import transformers

    from jaxassoc.models.gguf import read_gguf
    from jaxassoc.models.loading import load_model
    from jaxassoc.readouts.unstereo import score_sentences
    from jaxassoc.resources import smollm2_gguf

    model = load_model("smollm2-135m")
    hf_config, tensors, _ = read_gguf(smollm2_gguf())
    torch_model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**{k: v for k, v in hf_config.items() if k != "model_type"})
    )
    missing, unexpected = torch_model.load_state_dict(
        {k: torch.from_numpy(np.array(v)) for k, v in tensors.items()}, strict=False
    )
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    if missing:
        torch_model.lm_head.weight = torch_model.model.embed_tokens.weight
    male, female = u.fill_templates(u.load_use(5)["template"].tolist()[:4])
    sentences = male + female
    got = score_sentences(model, sentences)
    expected = _torch_scores(torch_model.float().eval(), model.tokenizer, model.vocab.bos_id, sentences)
    # SmolLM2-135M vs torch: 30 layers + the head, inner 1536, |logits| < 40 (37 on these prompts): atol=1e-3
    # had been far below the derived bound, ~0.2 for ~10 tokens (a priori, float32 chains this deep are
    # that loose; observed errors are ~1e-4)
    tol = _score_tol(model, sentences, f32_chain(31, 1536, 40.0), 40.0)
    assert np.all(np.abs(got - expected) <= tol)
