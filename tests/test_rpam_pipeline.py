"""RPAM host side on a tiny GPT-2: p(v, t) vs a straightforward transformers-PyTorch computation.

The reference runs one full forward pass per prompt and per (prompt + subwords) with the torch model,
takes the softmax over the attributes' first-token logits at the prompt's last position, and multiplies
by the mean full-vocabulary probability of subwords 2..k read left to right (Hodel et al. 2026, App. E).
"""

import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tolerances import f32_chain, f32_cos, f32_log_softmax, f32_sum

from jaxassoc.errors import ConfigError, InputError
from jaxassoc.metrics import rpam
from jaxassoc.metrics.weat import check_distinct_words
from jaxassoc.models import load_model
from jaxassoc.readouts import rpam as pipeline
from jaxassoc.readouts import rpam_downstream
from jaxassoc.readouts.rpam_prompts import PromptTemplate, rpam_inputs, tokenize_attributes
from jaxassoc.suites import rpam as rpam_suite

TP1 = PromptTemplate("tp1", "These words are associated: {target} and")
TP2 = PromptTemplate("tp2", "This sentence and this word are associated: {quote}This is {target}{quote} and {quote}")
# targets of different lengths (padding in one batch); attributes mixing single- and multi-token words
TARGETS = ["doctor", "nurse", "a test of words", "music"]
ATTRIBUTES = ["he", "music", "math", "a", "xylophone", "his", "word"]


# p = softmax over C of first-token logits x the mean of ≤ 3 subword probabilities, float32 (two programs, or
# ours vs torch) on the tiny GPT-2 (2 layers + the head, inner 128, |logits| < 0.5, 320 tokens): each log p
# within f32_log_softmax(320, f32_chain(3, 128, 0.5), 7) = 1.4e-5, a softmax over C likewise, so p within
# ~3 of them relative: P_RTOL ≈ 5e-5
P_RTOL = float(np.expm1(3 * f32_log_softmax(320, f32_chain(3, 128, 0.5), 7.0)))


@pytest.fixture(scope="module")
def models(tiny_checkpoint):
    folder = tiny_checkpoint("gpt2")
    return load_model(folder), family_specs.load_torch("gpt2", folder)


def _torch_p(torch_model, tokenizer, targets, attributes, template, normalise=True):
    """p(v, t) by full torch forward passes, one sequence at a time."""
    prefix = template.attribute_prefix
    out = np.zeros((len(targets), len(attributes)))
    for i, target in enumerate(targets):
        prompt = tokenizer(template.fill(target), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = torch_model(torch.tensor([prompt])).logits[0, -1].double()
        ids = [tokenizer(prefix + a, add_special_tokens=False)["input_ids"] for a in attributes]
        first = torch.stack([logits[a[0]] for a in ids])
        p_first = torch.softmax(first, 0) if normalise else torch.exp(first - torch.logsumexp(logits, 0))
        for j, a in enumerate(ids):
            factor = 1.0
            if len(a) > 1:
                with torch.no_grad():
                    seq_logits = torch_model(torch.tensor([prompt + a])).logits[0].double()
                logp = torch.log_softmax(seq_logits, -1)
                sub = [logp[len(prompt) + m - 1, a[m]].exp().item() for m in range(1, len(a))]
                factor = float(np.mean(sub))
            out[i, j] = p_first[j].item() * factor
    return out


@pytest.mark.parametrize("template", [TP1, TP2], ids=["tp1", "tp2"])
@pytest.mark.parametrize("normalise", [True, False], ids=["softmax_C", "ablation"])
def test_probabilities_match_torch(models, template, normalise):
    model, torch_model = models
    tokens = tokenize_attributes(model.tokenizer, ATTRIBUTES, template)
    assert tokens.multi_token, "the test needs multi-token attributes"
    assert len(tokens.multi_token) < len(ATTRIBUTES), "and single-token ones"
    # batch_size 2 over 4 targets x several suffixes: padded batches of mixed lengths
    p, inputs = pipeline.probabilities(model, TARGETS, ATTRIBUTES, template, normalise=normalise, batch_size=2)
    expected = _torch_p(torch_model, model.tokenizer, TARGETS, ATTRIBUTES, template, normalise)
    np.testing.assert_allclose(p, expected, rtol=P_RTOL)  # rtol=1e-4 had been 2x the derived bound
    assert inputs.n_multi_token == len(tokens.multi_token)
    # one row per prompt; every (target, multi-token attribute) continuation scored from its cache
    assert inputs.n_sequences == len(TARGETS)
    assert inputs.n_continuations == len(TARGETS) * len(tokens.multi_token)


def test_single_token_attributes_run_prompts_only(models):
    model, torch_model = models
    single = [
        w
        for w, ids in zip(ATTRIBUTES, tokenize_attributes(model.tokenizer, ATTRIBUTES, TP1).token_ids)
        if len(ids) == 1
    ]
    p, inputs = pipeline.probabilities(model, TARGETS, single, TP1, batch_size=3)
    np.testing.assert_allclose(p, _torch_p(torch_model, model.tokenizer, TARGETS, single, TP1), rtol=P_RTOL)
    assert inputs.n_multi_token == 0 and inputs.n_sequences == len(TARGETS)
    np.testing.assert_allclose(inputs.continuation, 1.0)


def test_attribute_tokenisation_follows_the_template(models):
    tok = models[0].tokenizer
    assert TP1.attribute_prefix == " " and TP2.attribute_prefix == ""
    tp1 = tokenize_attributes(tok, ["math"], TP1).token_ids[0]
    tp2 = tokenize_attributes(tok, ["math"], TP2).token_ids[0]
    assert list(tp1) == tok(" math", add_special_tokens=False)["input_ids"]
    assert list(tp2) == tok("math", add_special_tokens=False)["input_ids"]
    assert tp1 != tp2
    # the prompt ends where the attribute starts: no trailing space in TP1, an open quote in TP2
    assert TP1.fill("x").endswith(" and") and TP2.fill("x").endswith(' and "')


def test_duplicate_targets_share_passes_and_agree(models):
    model, _ = models
    p, inputs = pipeline.probabilities(model, ["doctor", "nurse", "doctor"], ATTRIBUTES, TP1)
    np.testing.assert_array_equal(p[0], p[2])
    n_multi = inputs.n_multi_token
    assert inputs.n_sequences == 2 and inputs.n_continuations == 2 * n_multi


def test_pairwise_task_computes_only_the_partners_continuations(models, monkeypatch):
    """WS-353: the softmax over C uses first-token logits only, so a pair needs the continuation of each
    word after its partner, not after every word; the needed entries equal the all-pairs computation."""
    import pandas as pd

    from jaxassoc import data
    from jaxassoc.readouts import rpam_prompts

    model, _ = models
    pairs = pd.DataFrame(
        {
            "word1": ["math", "science", "art", "music"],
            "word2": ["science", "art", "xylophone", "math"],
            "score": [7.0, 5.0, 2.0, 6.0],
        }
    )
    monkeypatch.setattr(data, "load_wordsim353", lambda: pairs)
    seen = []
    real = rpam_prompts.rpam_inputs
    monkeypatch.setattr(rpam_prompts, "rpam_inputs", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    items, _ = rpam_suite.wordsim353(model, TP2, batch_size=2)
    words = sorted(set(pairs["word1"]) | set(pairs["word2"]))
    multi = set(tokenize_attributes(model.tokenizer, words, TP2).multi_token)
    ordered = {(a, b) for a, b in zip(pairs["word1"], pairs["word2"])} | {
        (b, a) for a, b in zip(pairs["word1"], pairs["word2"])
    }
    n_needed = sum(words.index(b) in multi for _, b in ordered)
    all_pairs = len(words) * len(multi)
    assert 0 < n_needed < all_pairs
    assert seen[0].n_continuations == n_needed  # the count the scorer exposes
    p_all, inputs_all = pipeline.probabilities(model, words, words, TP2, batch_size=2)
    assert inputs_all.n_continuations == all_pairs
    i1, i2 = (np.array([words.index(w) for w in pairs[c]]) for c in ("word1", "word2"))
    # the scorer ran other batches (the needed continuations only): other programs, P_RTOL (rtol=1e-6 had
    # asked for one program)
    np.testing.assert_allclose(items["score"], (p_all[i1, i2] + p_all[i2, i1]) / 2, rtol=P_RTOL)
    unneeded = np.ones((len(words), len(words)), bool)
    unneeded[i1, i2] = unneeded[i2, i1] = False
    multi_column = np.isin(np.arange(len(words)), list(multi))[None, :]
    assert np.isnan(seen[0].continuation[unneeded & multi_column]).all()  # never computed
    assert np.isfinite(seen[0].continuation[~(unneeded & multi_column)]).all()


def test_tasks_share_prompts_and_continuations(models):
    """Several tasks in one run (WEAT-WS's tests): each (prompt, continuation) runs once, and each task's
    p equals its own run."""
    model, _ = models
    tasks = [(TARGETS[:3], ATTRIBUTES[:5]), (TARGETS[1:], ATTRIBUTES[2:])]
    ps, inputs = pipeline.task_probabilities(model, tasks, TP1, batch_size=2)
    multi = set(tokenize_attributes(model.tokenizer, ATTRIBUTES, TP1).multi_token)
    needed = {(t, a) for ts, attrs in tasks for t in ts for a in attrs if ATTRIBUTES.index(a) in multi}
    alone = [pipeline.probabilities(model, ts, attrs, TP1, batch_size=2) for ts, attrs in tasks]
    assert inputs.n_sequences == len(TARGETS) and inputs.n_continuations == len(needed)
    assert inputs.n_continuations < sum(a.n_continuations for _, a in alone)
    for p, (q, _) in zip(ps, alone):
        np.testing.assert_allclose(p, q, rtol=P_RTOL)  # other batches: other programs (rtol=1e-5 had been below)


def test_prompt_with_more_packed_subwords_than_a_row_holds_runs_in_several_rows(models, monkeypatch):
    from jaxassoc.readouts import rpam_prompts

    model, _ = models
    p, inputs = pipeline.probabilities(model, TARGETS, ATTRIBUTES, TP2, batch_size=4)
    monkeypatch.setattr(rpam_prompts, "CONTINUATION_BUCKETS", (4,))  # at most 4 packed subwords per row
    p_split, split = pipeline.probabilities(model, TARGETS, ATTRIBUTES, TP2, batch_size=4)
    assert inputs.n_sequences == len(TARGETS) < split.n_sequences
    assert split.n_continuations == inputs.n_continuations
    np.testing.assert_allclose(p_split, p, rtol=P_RTOL)  # other rows: other programs (rtol=1e-5 had been below)


def test_attribute_may_equal_a_target(models):
    """Documented: WS-353 uses every word as target and attribute; only the RPAM Test refuses overlap
    (the word rule shared by every metric with word sets: jaxassoc.metrics.weat.check_distinct_words)."""
    model, torch_model = models
    words = ["math", "science", "art"]
    p, _ = pipeline.probabilities(model, words, words, TP1)
    np.testing.assert_allclose(p, _torch_p(torch_model, model.tokenizer, words, words, TP1), rtol=P_RTOL)
    with pytest.raises(InputError, match=r"C1: word 'art' is in both 'X' and 'A'"):
        check_distinct_words("C1", (["art", "math"], ["music"], ["art"], ["science"]))


def test_unequal_attribute_sets_are_allowed(models):
    """A and B of different sizes: the means of Eq. 2 handle it (s = mean_A p - mean_B p)."""
    model, _ = models
    a, b = ["math", "he", "xylophone"], ["music"]
    p, _ = pipeline.probabilities(model, TARGETS, a + b, TP1)
    s = np.asarray(rpam.association_scores(jnp.asarray(p), n_a=3))
    # the same float32 p's: a mean of 3 and a difference, absolute (rtol=1e-6 fails where s cancels)
    top = float(np.abs(p).max())
    np.testing.assert_allclose(s, p[:, :3].mean(1) - p[:, 3], rtol=0, atol=f32_sum(3, top / 3) + f32_sum(1, top))


@pytest.mark.parametrize(
    "text, match",
    [
        ("These words are associated: and", "no {target} slot"),
        ("{target} and {other}", "unknown slots"),
        ("These words are associated: {target and", "malformed"),
        ("{target} and }", "malformed"),
    ],
)
def test_bad_templates(text, match):
    with pytest.raises(ConfigError, match=match):
        PromptTemplate("bad", text)


def test_bad_inputs(models):
    model, _ = models
    tok = model.tokenizer
    with pytest.raises(InputError, match=r"duplicates \['math'\]"):
        tokenize_attributes(tok, ["math", "art", "math"], TP1)
    with pytest.raises(InputError, match="tokenises to nothing"):
        tokenize_attributes(tok, ["math", ""], TP2)
    with pytest.raises(InputError, match="empty target"):
        pipeline.probabilities(model, ["doctor", "  "], ["math", "art"], TP1)
    long_target = " ".join(["music"] * model.max_positions)
    with pytest.raises(InputError, match=r"exceeds the context of 64 tokens"):
        rpam_inputs(model, [long_target], tokenize_attributes(tok, ["math"], TP1), TP1)
    with pytest.raises(InputError, match=r"needed has shape \(2, 2\), not \(targets, attributes\) = \(1, 2\)"):
        rpam_inputs(model, ["doctor"], tokenize_attributes(tok, ["math", "art"], TP1), TP1, needed=np.ones((2, 2)))


def test_masked_model_is_refused(tiny_checkpoint):
    bert = load_model(tiny_checkpoint("bert"))
    with pytest.raises(InputError, match="is a masked model: RPAM needs a causal LM"):
        rpam_inputs(bert, ["doctor"], tokenize_attributes(bert.tokenizer, ["math"], TP1), TP1)


def _torch_greedy(torch_model, prompt, n_new, stop):
    ids, new = list(prompt), []
    for _ in range(n_new):
        with torch.no_grad():
            token = int(torch_model(torch.tensor([ids])).logits[0, -1].argmax())
        ids.append(token)
        new.append(token)
        if stop[token]:
            break
    return new


def test_greedy_generation_matches_torch(models):
    model, torch_model = models
    tok = model.tokenizer
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in ("The doctor said", "She studies math and", "a")]
    stop = np.zeros(len(tok), dtype=bool)
    got = rpam_downstream.greedy_generate(model, prompts, max_new_tokens=4, stop=stop, batch_size=2)
    assert got == [_torch_greedy(torch_model, p, 4, stop) for p in prompts]
    # a stop token ends a row early; the other rows go on
    first = got[0][0]
    stop[first] = True
    got = rpam_downstream.greedy_generate(model, prompts, max_new_tokens=4, stop=stop, batch_size=4)
    assert got == [_torch_greedy(torch_model, p, 4, stop) for p in prompts]
    assert len(got[0]) == 1


@pytest.mark.parametrize(
    "answer, rating",
    [
        (" 4", 4),
        ("5.", 5),
        ("The rating is 2", 2),
        ("7", None),
        ("none", None),
        ("0", None),
        ("10", None),
        ("3.5 out of 5", None),
        ("4/5", 4),
    ],
)
def test_parse_rating(answer, rating):
    assert rpam_downstream.parse_rating(answer) == rating


def test_rating_prompt_and_chat_template(models):
    model, _ = models
    text = rpam_downstream.RATING_PROMPT.format(word="sunshine")
    assert text.endswith('The rating of the word "sunshine" is:') and "rate it as 5" in text
    assert (
        rpam_downstream.rating_prompts(model, ["sunshine"], chat_template=False)[0]
        == model.tokenizer(text, add_special_tokens=False)["input_ids"]
    )
    with pytest.raises(ConfigError, match="no chat template.*chat_template=false"):
        rpam_downstream.rating_prompts(model, ["sunshine"], chat_template=True)


def test_bellezza_reports_both_normalisations_from_one_run(models):
    import jax
    from scipy import stats as sps

    model, _ = models
    key = jax.random.key(3)
    items, agg = rpam_suite.bellezza(model, TP1, sample=6, key=key)
    assert len(items) == 6 and sorted(agg["normalised"].unique()) == [False, True]
    spearman = agg[(agg["statistic"] == "spearman") & agg["normalised"]]["correlation"].item()
    # ρ from exact ranks: a few u (abs=1e-5); Pearson's r in float32: f32_cos(n) (abs=1e-4 had been 60x that)
    assert spearman == pytest.approx(sps.spearmanr(items["score"], items["valence"]).statistic, abs=1e-5)
    ablation, _ = rpam_suite.bellezza(model, TP1, sample=6, key=key, normalise=False)
    pearson = agg[(agg["statistic"] == "pearson") & ~agg["normalised"]]["correlation"].item()
    ref = sps.pearsonr(ablation["score"], ablation["valence"]).statistic
    assert pearson == pytest.approx(ref, abs=f32_cos(len(ablation)))
    with pytest.raises(InputError, match="at least 3"):
        rpam_suite.subsample(items, 2, key)


@pytest.mark.slow
def test_smollm2_probabilities_match_transformers():
    """The embedded SmolLM2 (GGUF dequantised, loaded into transformers' LlamaForCausalLM) vs our port."""
    import transformers

    from jaxassoc.models.gguf import read_gguf
    from jaxassoc.resources import smollm2_gguf

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
    torch_model = torch_model.float().eval()
    model = load_model("smollm2-135m")
    targets, attributes = ["doctor", "a happy family", "insect"], ["math", "poetry", "sunrise", "caress", "vomit"]
    for template in (TP1, TP2):
        assert tokenize_attributes(model.tokenizer, attributes, template).multi_token
        p, _ = pipeline.probabilities(model, targets, attributes, template, batch_size=4)
        expected = _torch_p(torch_model, model.tokenizer, targets, attributes, template)
        # SmolLM2-135M: 30 layers + the head, inner 1536, |logits| < 40 (37 on these prompts), 49,152 tokens:
        # each log p within f32_log_softmax(V, f32_chain(31, 1536, 40), log V + 80), ~2e-2, x3 for p (rtol=2e-4
        # had been far below this a-priori bound)
        vocab = model.head.W.shape[0]
        rtol = float(np.expm1(3 * f32_log_softmax(vocab, f32_chain(31, 1536, 40.0), np.log(vocab) + 80)))
        np.testing.assert_allclose(p, expected, rtol=rtol)
