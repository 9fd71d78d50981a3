"""Self-Debias (Schick et al. 2021, Eq. 2; jaxassoc.mitigation.self_debias) against an independent PyTorch
re-implementation of the formula run on transformers, one row at a time (the plain input alone, each
prefixed input alone), on tiny random GPT-2 and BERT checkpoints; the options' effects and refusals."""

from __future__ import annotations

import family_specs
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from tolerances import EPS32, f32_chain, f32_log_softmax, f32_sum

from jaxassoc.errors import ConfigError, InputError, ModelError
from jaxassoc.mitigation import self_debias as sd
from jaxassoc.models.interventions import tokenize

TEXTS = [
    "The doctor said that he would help the nurse.",
    "She studies math.",
    "People from every country enjoy music and food.",
]
PREFIXES = ["The engineer is bad:\n", "She studies art and music:\n"]  # short: the tiny context is 128 tokens


@pytest.fixture(scope="module")
def gpt2(tiny_checkpoint):
    from jaxassoc.models.loading import load_model

    folder = tiny_checkpoint("gpt2", 3, n_positions=128)
    return load_model(folder), family_specs.load_torch("gpt2", folder)


@pytest.fixture(scope="module")
def bert(tiny_checkpoint):
    from jaxassoc.models.loading import load_model

    folder = tiny_checkpoint("bert", 3, max_position_embeddings=128)
    return load_model(folder), family_specs.load_torch("bert", folder)


def reference(plain_logits: torch.Tensor, prefixed_logits: list[torch.Tensor], decay: float, epsilon: float):
    """The formula, written anew in torch float32: p' ∝ p · max(exp(-λ·max(0, max_i p_i - p)), ε)."""
    p = torch.softmax(plain_logits, -1)
    p_max = torch.stack([torch.softmax(x, -1) for x in prefixed_logits]).max(0).values
    scale = torch.clamp(torch.exp(-decay * torch.clamp(p_max - p, min=0.0)), min=epsilon)
    q = p * scale
    return torch.log(q / q.sum(-1, keepdim=True))


def tolerance(logit_tol: float, vocab: int, p_max: float, decay: float, out_max: float) -> float:
    """Float32 bound of |ours - reference| from the logits' bound ``logit_tol``: each log-softmax within
    e = f32_log_softmax(...); a probability p within p·(e + EPS32), so alpha = max_i p_i - p within
    2·p_max·(e + EPS32) (p_max: the largest probability anywhere), the log-scale -λ·alpha within λ times that
    plus two roundings (the product; the reference's exp/clamp/log); log q = log p + log-scale then within
    e + that, and the renormalisation (log q minus its log-sum-exp, a weighted mean of the log q's) doubles it,
    plus the rounding of the V-term sum and of the final subtraction."""
    e = f32_log_softmax(vocab, logit_tol, 10.0)
    log_q = e + decay * 2 * p_max * (e + EPS32) + 2 * EPS32
    return 2 * log_q + f32_sum(vocab, 1 / vocab) + f32_sum(1, out_max)


def torch_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float()


def logit_tol(torch_model, logits: torch.Tensor) -> float:
    """Ours vs torch through the layers and the head (inner size ≤ 128: the MLP's 4 × 32)."""
    return f32_chain(torch_model.config.num_hidden_layers + 1, 128, float(logits.abs().max()))


def causal_reference(model, torch_model, text: str, prefixes: list[str], decay: float, epsilon: float):
    """(n, V) debiased log p'(next | tokens ≤ t) for the n tokens [BOS, sentence] of ``text``, each row alone,
    with the largest probability seen and the logits' tolerance."""
    sent = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    plain_ids = [model.vocab.bos_id, *sent]
    plain = torch_logits(torch_model, plain_ids)
    prefixed = []
    for prefix in prefixes:
        pre = model.tokenizer(prefix, add_special_tokens=False)["input_ids"]
        prefixed.append(torch_logits(torch_model, [model.vocab.bos_id, *pre, *sent])[len(pre) :])
    p_max = max(float(torch.softmax(x, -1).max()) for x in [plain, *prefixed])
    tol = max(logit_tol(torch_model, x) for x in [plain, *prefixed])
    return reference(plain, prefixed, decay, epsilon).numpy(), plain_ids, p_max, tol


@pytest.mark.parametrize("decay, epsilon", [(sd.DECAY, sd.EPSILON), (3e4, 0.5)])  # the second hits the floor
def test_causal_log_probs_equal_the_torch_formula_row_by_row(gpt2, decay, epsilon):
    model, torch_model = gpt2
    ids, mask = tokenize(model, TEXTS)
    ours = np.asarray(sd.self_debias_log_probs(model, ids, mask, prefixes=PREFIXES, decay=decay, epsilon=epsilon))
    V = model.config.vocab_size
    for b, text in enumerate(TEXTS):
        ref, plain_ids, p_max, ltol = causal_reference(model, torch_model, text, PREFIXES, decay, epsilon)
        n = len(plain_ids)
        tol = tolerance(ltol, V, p_max, decay, float(np.abs(ref).max()))
        assert np.abs(ours[b, :n] - ref).max() <= tol
        plain = torch.log_softmax(torch_logits(torch_model, plain_ids), -1).numpy()
        assert np.abs(ref - plain).max() > 20 * tol  # the prefixes move the distribution well beyond the bound


def test_causal_sentence_scores_sum_the_debiased_token_log_probs(gpt2):
    model, torch_model = gpt2
    ours = sd.self_debias_sentence_log_prob(model, TEXTS, prefixes=PREFIXES)
    for b, text in enumerate(TEXTS):
        ref, plain_ids, p_max, ltol = causal_reference(model, torch_model, text, PREFIXES, sd.DECAY, sd.EPSILON)
        picked = [ref[t, plain_ids[t + 1]] for t in range(len(plain_ids) - 1)]
        tol = tolerance(ltol, model.config.vocab_size, p_max, sd.DECAY, float(np.abs(ref).max()))
        # n per-token values each within tol, summed in float64
        assert abs(ours[b] - float(np.sum(picked, dtype=np.float64))) <= len(picked) * tol


def test_masked_log_probs_and_pseudo_log_likelihood_equal_the_torch_formula(bert):
    model, torch_model = bert
    text, V = TEXTS[0], model.config.vocab_size
    seq = model.tokenizer(text)["input_ids"]
    pres = [model.tokenizer(p, add_special_tokens=False)["input_ids"] for p in PREFIXES]
    positions = list(range(1, len(seq) - 1))
    masked = [[*seq[:j], model.vocab.mask_id, *seq[j + 1 :]] for j in positions]
    ours = np.asarray(
        sd.self_debias_masked_log_probs(model, jnp.asarray(masked), jnp.ones((len(masked), len(seq)), jnp.int32),
                                        prefixes=PREFIXES)
    )  # fmt: skip
    total, bound = 0.0, 0.0
    for row, (j, ids) in enumerate(zip(positions, masked)):
        plain = torch_logits(torch_model, ids)[j]
        prefixed = [torch_logits(torch_model, [ids[0], *pre, *ids[1:]])[j + len(pre)] for pre in pres]
        ref = reference(plain, prefixed, sd.DECAY, sd.EPSILON).numpy()
        p_max = max(float(torch.softmax(x, -1).max()) for x in [plain, *prefixed])
        tol = tolerance(
            max(logit_tol(torch_model, x) for x in [plain, *prefixed]), V, p_max, sd.DECAY, np.abs(ref).max()
        )
        assert np.abs(ours[row] - ref).max() <= tol
        total, bound = total + float(ref[seq[j]]), bound + tol
    assert abs(sd.self_debias_sentence_log_prob(model, [text], prefixes=PREFIXES)[0] - total) <= bound


def test_zero_decay_or_unit_floor_gives_the_plain_distribution(gpt2, bert):
    from jaxassoc.readouts.sentence_scores import (
        causal_log_likelihoods,
        causal_token_ids,
        masked_logprobs,
        pseudo_log_likelihoods,
    )

    model, _ = gpt2
    ids, mask = tokenize(model, TEXTS)
    plain = np.asarray(jax_log_softmax(model, ids, mask))
    real = np.asarray(mask, bool)
    for options in ({"decay": 0.0}, {"epsilon": 1.0}):
        ours = np.asarray(sd.self_debias_log_probs(model, ids, mask, prefixes=PREFIXES, **options))
        # two float32 programs of different batch shapes: f32_chain for the logits, then f32_log_softmax
        tol = f32_log_softmax(model.config.vocab_size, f32_chain(3, 128, 1.0), 10.0)
        assert np.abs(ours[real] - plain[real]).max() <= 2 * tol  # log-softmax, then the (no-op) renormalisation
    start = model.vocab.bos_id
    seqs = causal_token_ids(model, TEXTS, start)
    # n tokens, each within the per-value bound at λ = 0 (|logits| < 1 in these tiny models), summed in float64
    per_token = tolerance(f32_chain(3, 128, 1.0), model.config.vocab_size, 1.0, 0.0, 10.0)
    ours = sd.self_debias_sentence_log_prob(model, TEXTS, decay=0.0)
    assert np.all(np.abs(ours - causal_log_likelihoods(model, seqs)) <= per_token * np.array([len(s) for s in seqs]))
    bmodel, _ = bert
    seqs = bmodel.tokenizer(TEXTS)["input_ids"]
    where = [list(range(1, len(s) - 1)) for s in seqs]
    expected = [p.astype(np.float64).sum() for p in pseudo_log_likelihoods(bmodel, seqs, where)]
    per_token = tolerance(f32_chain(3, 128, 1.0), bmodel.config.vocab_size, 1.0, 0.0, 10.0)
    ours = sd.self_debias_sentence_log_prob(bmodel, TEXTS, decay=0.0)
    assert np.all(np.abs(ours - expected) <= per_token * np.array([len(w) for w in where]))
    masked = [[*s[:2], bmodel.vocab.mask_id, *s[3:]] for s in seqs]  # StereoSet's form: masked and filled rows
    ours = sd.self_debias_masked_logprobs(bmodel, masked, seqs, decay=0.0)
    assert np.abs(ours - masked_logprobs(bmodel, masked, seqs)).max() <= per_token


def jax_log_softmax(model, ids, mask):
    import jax

    from jaxassoc.models.heads import head_logits

    return jax.nn.log_softmax(head_logits(model.head, model.forward(model.params["body"], ids, mask).hidden), -1)


def largest_probability(model, texts, prefixes) -> float:
    """The largest probability a causal model gives any token at any position of the texts, plain or after a
    prefix (each row alone: BOS, prefix, text): p_max of tolerance()."""
    best = 0.0
    for text in texts:
        sent = model.tokenizer(text, add_special_tokens=False)["input_ids"]
        first = model.vocab.bos_id
        for prefix in ["", *prefixes]:
            pre = model.tokenizer(prefix, add_special_tokens=False)["input_ids"] if prefix else []
            ids = jnp.asarray([[first, *pre, *sent]])
            best = max(best, float(jnp.exp(jax_log_softmax(model, ids, jnp.ones_like(ids))).max()))
    return best


@pytest.mark.parametrize("which", ["gpt2", "bert"])
def test_batched_equals_one_sentence_at_a_time_and_padding_side_does_not_matter(gpt2, bert, which):
    model, _ = gpt2 if which == "gpt2" else bert
    together = sd.self_debias_sentence_log_prob(model, TEXTS, "all")
    alone = np.array([sd.self_debias_sentence_log_prob(model, [t], "all")[0] for t in TEXTS])
    # two float32 programs of different batch shapes: each token within tolerance() from logits within
    # f32_chain(3, 128, 1) (|logits| < 1 here), at p_max = the largest probability any row gives, summed
    # (BERT scores masked copies, not these rows: there p_max = 1, the bound for any distribution)
    p_max = largest_probability(model, TEXTS, sd.prefixes_for("all")) if which == "gpt2" else 1.0
    per_token = tolerance(f32_chain(3, 128, 1.0), model.config.vocab_size, p_max, sd.DECAY, 10.0)
    counts = np.array([len(model.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in TEXTS])
    assert np.all(np.abs(together - alone) <= per_token * counts)
    if which == "gpt2":
        ids, mask = tokenize(model, TEXTS)
        right = np.asarray(sd.self_debias_log_probs(model, ids, mask))
        n = np.asarray(mask).sum(1)
        T = ids.shape[1]
        left_ids = np.stack([np.roll(np.asarray(ids[b]), T - n[b]) for b in range(len(TEXTS))])
        left_mask = np.stack([np.roll(np.asarray(mask[b]), T - n[b]) for b in range(len(TEXTS))])
        left = np.asarray(sd.self_debias_log_probs(model, left_ids, left_mask))
        for b in range(len(TEXTS)):
            assert np.abs(right[b, : n[b]] - left[b, T - n[b] :]).max() <= per_token


def test_each_option_changes_the_result(gpt2, bert):
    for model, _ in (gpt2, bert):
        base = sd.self_debias_sentence_log_prob(model, TEXTS[:2])
        runs = {
            "gender": sd.self_debias_sentence_log_prob(model, TEXTS[:2], "gender"),
            "race": sd.self_debias_sentence_log_prob(model, TEXTS[:2], "race"),
            "religion": sd.self_debias_sentence_log_prob(model, TEXTS[:2], "religion"),
            "prefixes": sd.self_debias_sentence_log_prob(model, TEXTS[:2], prefixes=PREFIXES),
            "decay": sd.self_debias_sentence_log_prob(model, TEXTS[:2], decay=5.0),
            "plain": sd.self_debias_sentence_log_prob(model, TEXTS[:2], decay=0.0),
        }
        for name, scores in runs.items():
            assert np.abs(scores - base).max() > 1e-4, name
        strong = dict(prefixes=PREFIXES, decay=3e4)  # the floor binds only when the scaling is strong
        a = sd.self_debias_sentence_log_prob(model, TEXTS[:2], epsilon=0.01, **strong)
        b = sd.self_debias_sentence_log_prob(model, TEXTS[:2], epsilon=0.5, **strong)
        assert np.abs(a - b).max() > 1e-4
    # race-color (CrowS-Pairs' label) is race
    assert sd.prefixes_for("race-color") == sd.prefixes_for("race")
    assert sd.prefixes_for("all") == tuple(sd.DEFAULT_PREFIXES[b] for b in sd.BIAS_TYPES)


def test_refusals_name_the_input(gpt2, bert, tiny_checkpoint):
    model, _ = gpt2
    with pytest.raises(ConfigError, match="'sexism'.*gender, race, religion"):
        sd.self_debias_sentence_log_prob(model, TEXTS, "sexism")
    with pytest.raises(ConfigError, match="decay=-1"):
        sd.self_debias_sentence_log_prob(model, TEXTS, decay=-1.0)
    with pytest.raises(ConfigError, match="epsilon=2"):
        sd.self_debias_sentence_log_prob(model, TEXTS, epsilon=2.0)
    with pytest.raises(ConfigError, match="prefix '' has no tokens"):
        sd.self_debias_sentence_log_prob(model, TEXTS, prefixes=[""])
    long = "The doctor said that he would help the nurse. " * 6
    with pytest.raises(ConfigError, match=r"input 0 has \d+ tokens, and the prefix 'The doctor.*128-token context"):
        sd.self_debias_sentence_log_prob(model, TEXTS, prefixes=[long])
    ids, mask = tokenize(model, TEXTS)
    with pytest.raises(InputError, match="row 0 starts with token"):
        sd.self_debias_log_probs(model, ids[:, 1:], mask[:, 1:])
    bmodel, _ = bert
    with pytest.raises(ModelError, match="for causal LMs.*self_debias_masked_log_probs"):
        sd.self_debias_log_probs(bmodel, *tokenize(bmodel, TEXTS))
    with pytest.raises(InputError, match="row 0 holds 0 mask tokens"):
        sd.self_debias_masked_log_probs(bmodel, *tokenize(bmodel, TEXTS))
    from family_specs.t5 import V11

    from jaxassoc.models.loading import load_model

    t5 = load_model(tiny_checkpoint(V11))
    with pytest.raises(ModelError, match="encoder-decoder \\(t5\\)"):
        sd.self_debias_sentence_log_prob(t5, TEXTS)


def test_compiles_once_per_shape_whatever_the_prefix_texts_and_options(gpt2):
    model, _ = gpt2
    sd.self_debias_sentence_log_prob(model, TEXTS, prefixes=["She is bad:\n", "He is bad:\n"])
    size = sd.causal_token_logprobs._cache_size()
    sd.self_debias_sentence_log_prob(model, TEXTS, prefixes=["He is bad:\n", "She is bad:\n"], decay=7.0, epsilon=0.2)
    assert sd.causal_token_logprobs._cache_size() == size
