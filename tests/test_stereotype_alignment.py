"""Alignment with human ratings against scipy (Kendall τ-b), plain-Python P@3 and medians, on the real
human ratings of Cao et al. (2022); the human-group mapping is checked for completeness."""

import json

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import scipy.stats
from tolerances import f32_sum

from jaxassoc.data import load_abc, load_human_ratings
from jaxassoc.data._files import data_path
from jaxassoc.errors import DataError, InputError
from jaxassoc.metrics.stereotype_alignment import (
    alignment,
    emergent_scores,
    human_group_indices,
    pair_scores,
)


def _human_matrix():
    ratings = load_human_ratings()
    groups = list(dict.fromkeys(ratings.group))
    pairs = list(dict.fromkeys(ratings.trait_pair))
    return groups, ratings.pivot(index="group", columns="trait_pair", values="rating").loc[groups, pairs].to_numpy()


def _p_at_3_reference(model_row, human_row):
    order = sorted(range(len(model_row)), key=lambda t: -model_row[t])  # stable: earlier pair wins ties
    low = sorted(range(len(model_row)), key=lambda t: model_row[t])
    top = sum(human_row[t] > 50 for t in order[:3]) / 3
    bottom = sum(human_row[t] < 50 for t in low[:3]) / 3
    return (top + bottom) / 2, top, bottom


def test_tau_and_p_at_3_match_scipy_and_a_python_loop_on_the_human_ratings():
    groups, human = _human_matrix()
    assert human.shape == (26, 16)
    rng = np.random.default_rng(0)
    model = (human - 50) / 10 + rng.normal(size=human.shape) * 2  # noisy model scores
    model[3, :4] = model[3, 0]  # ties in one group
    res = alignment(model, human)
    # τ in float32 on float32 copies (scipy gets the same copies): the pair counts are exact, only the final
    # ratio and square root round, a few u: abs=1e-5; P@3 is a share of 3 exact counts (pytest's rel=1e-6)
    for g in range(26):
        ref = scipy.stats.kendalltau(model[g].astype(np.float32), human[g].astype(np.float32)).statistic
        assert float(res.tau_per_group[g]) == pytest.approx(ref, abs=1e-5)
        both, top, bottom = _p_at_3_reference(model[g].astype(np.float32), human[g])
        assert float(res.p_at_3_per_group[g]) == pytest.approx(both)
        assert float(res.p_at_3_top[g]) == pytest.approx(top)
        assert float(res.p_at_3_bottom[g]) == pytest.approx(bottom)
    overall = scipy.stats.kendalltau(model.astype(np.float32).ravel(), human.astype(np.float32).ravel()).statistic
    assert float(res.tau_overall) == pytest.approx(overall, abs=1e-5)
    assert float(res.p_at_3_overall) == pytest.approx(
        np.mean([_p_at_3_reference(m, h)[0] for m, h in zip(model.astype(np.float32), human)])
    )
    perfect = alignment(human - 50, human)  # the human ratings themselves: τ = 1, the best P@3 possible
    np.testing.assert_allclose(np.asarray(perfect.tau_per_group), 1.0, atol=1e-6)  # exact counts: a few u
    best_top = np.minimum((human > 50).sum(axis=1), 3) / 3  # a group with < 3 right-pole pairs caps it
    best_bottom = np.minimum((human < 50).sum(axis=1), 3) / 3
    np.testing.assert_allclose(np.asarray(perfect.p_at_3_per_group), (best_top + best_bottom) / 2, atol=1e-6)


def test_pair_scores_are_differences_of_ragged_medians():
    rng = np.random.default_rng(1)
    left, right = rng.normal(size=(5, 16, 4)), rng.normal(size=(5, 16, 4))
    n_left, n_right = rng.integers(2, 5, 16), rng.integers(2, 5, 16)
    lv = np.broadcast_to(np.arange(4) < n_left[:, None], (5, 16, 4))
    rv = np.broadcast_to(np.arange(4) < n_right[:, None], (5, 16, 4))
    ours = np.asarray(pair_scores(jnp.asarray(left), jnp.asarray(lv), jnp.asarray(right), jnp.asarray(rv)))
    ref = np.array(
        [
            [np.median(right[g, t, : n_right[t]]) - np.median(left[g, t, : n_left[t]]) for t in range(16)]
            for g in range(5)
        ]
    )
    # float32 copies (u relative), medians of an even count average two values, and a difference: absolute
    # 2·f32_sum(2, max|x|) (rtol=1e-5 had been loose where the medians are large, tight where they cancel)
    np.testing.assert_allclose(
        ours, ref, rtol=0, atol=2 * f32_sum(2, float(max(np.abs(left).max(), np.abs(right).max())))
    )


def test_every_human_group_maps_to_a_template_group_or_the_prior_noun():
    abc = load_abc()
    with open(data_path("us_stereotypes/dataset/Aggregated_scores.json")) as f:
        human_groups = list(json.load(f))
    names = list(abc.groups["<sgroup>"]) + [abc.priors["<sgroup>"]]
    idx = human_group_indices(human_groups, abc.human_groups, names)
    assert len(set(idx)) == len(human_groups) == 26  # one-to-one
    assert names[idx[human_groups.index("Blacks/African Americans")]] == "Black person"
    assert names[idx[human_groups.index("average people")]] == "person"  # the prior noun itself
    with pytest.raises(DataError, match="Martians"):
        human_group_indices(human_groups + ["Martians"], abc.human_groups, names)
    with pytest.raises(DataError, match="'women' -> 'woman'"):
        human_group_indices(["women"], abc.human_groups, ["man"])


def test_emergent_scores():
    paired = jnp.array([[1.0, -2.0], [0.5, 0.0]])
    first = jnp.array([[0.5, -1.0], [0.5, 1.0]])
    second = jnp.array([[0.8, -3.0], [0.0, -1.0]])
    res = emergent_scores(paired, first, second)
    # float32 decimals (u relative, |x| ≤ 3) and one subtraction: f32_sum(2, 3)
    tol = f32_sum(2, 3.0)
    np.testing.assert_allclose(np.asarray(res.above_max), [[0.2, -1.0], [0.0, -1.0]], rtol=0, atol=tol)
    np.testing.assert_allclose(np.asarray(res.below_min), [[0.5, 1.0], [0.5, 1.0]], rtol=0, atol=tol)


def test_alignment_refuses_bad_shapes_and_nan_scores():
    human = np.full((2, 16), 60.0)
    with pytest.raises(InputError, match="groups, trait pairs"):
        alignment(np.zeros((2, 15)), human)
    model = np.zeros((2, 16))
    model[1, 3] = np.nan
    with pytest.raises(InputError, match=r"groups \[1\]"):
        alignment(model, human)


# --- the causal-LM pipeline (jaxassoc.readouts.stereotypes) on a tiny Llama vs torch ----------
import family_specs  # noqa: E402
import torch  # noqa: E402
from reference_set_numpy import set_distance  # noqa: E402

from jaxassoc.errors import ConfigError  # noqa: E402
from jaxassoc.models import load_model  # noqa: E402
from jaxassoc.readouts.stereotypes import causal_prefix, is_causal_template  # noqa: E402
from jaxassoc.suites.stereotypes import human_alignment, pair_matrix, score_causal  # noqa: E402


def _torch_terms(model, tok, prefix, word, bos_id):
    """log p(first token), ILPS*'s renormalised log P(word), SeT word score (−max distance), with torch."""
    prompt = [bos_id] + tok.encode(prefix, add_special_tokens=False)
    trait = tok.encode(" " + word, add_special_tokens=False)
    ids = torch.tensor([prompt + trait])
    with torch.no_grad():
        out = model(ids, output_hidden_states=True)
    names = tok.convert_ids_to_tokens(list(range(len(tok))))
    initial = np.array([n.startswith("Ġ") for n in names])
    W = model.lm_head.weight.detach().double().numpy()
    chain, distances = 0.0, []
    for i, t in enumerate(trait):
        pos = len(prompt) - 1 + i
        probs = torch.softmax(out.logits[0, pos].double(), -1).numpy()
        chain += np.log(probs[t] / probs[initial if i == 0 else ~initial].sum())
        if i == 0:
            first = np.log(probs[t])
        x = out.hidden_states[-1][0, pos].double().numpy()  # after the final norm
        distances.append(set_distance(W, None, x, t))
    return first, chain, -max(distances)


def test_causal_pipeline_matches_torch_on_a_tiny_llama(tiny_checkpoint):
    folder = tiny_checkpoint("llama", 2)
    ours_model, ref_model = load_model(folder), family_specs.load_torch("llama", folder)
    abc = load_abc()
    template, groups, words = "The <sgroup> is <mask>.", ["doctor", "Amish person"], ["warm", "self-assured", "poor"]
    df = score_causal(ours_model, abc, template, groups=groups, words=words, batch_size=4)
    tok = ours_model.tokenizer
    assert max(len(tok.encode(" " + w, add_special_tokens=False)) for w in words) > 1
    bos = ours_model.vocab.bos_id
    prior = {w: _torch_terms(ref_model, tok, "The person is", w, bos) for w in words}
    for g in groups:
        for w in words:
            first, chain, set_score = _torch_terms(ref_model, tok, f"The {g} is", w, bos)
            row = df[(df.group == g) & (df.word == w)].iloc[0]
            # float32 tiny llama (2 layers + the head, inner 64, |logits| < 1, 320 tokens) vs torch: a log p
            # within f32_log_softmax(320, f32_chain(3, 64, 1), 8) = 1.7e-5. ilps: 2 of them (3.4e-5);
            # ilps*: 2 prompts x ≤ 3 tokens x 2 log-softmax terms: 2e-4; SeT: distances from logits within
            # f32_chain, ~1e-5. abs=2e-4 for all three
            assert row.ilps == pytest.approx(first - prior[w][0], abs=2e-4)
            assert row.ilps_star == pytest.approx(chain - prior[w][1], abs=2e-4)
            assert row.set == pytest.approx(set_score - prior[w][2], abs=2e-4)


def test_causal_templates_and_prefixes():
    abc = load_abc()
    usable = [t for t in abc.all_templates if is_causal_template(t)]
    assert len(usable) == 33  # all but "The <mask> people are <pgroup>." and "... more <mask> than others."
    assert causal_prefix("Why are <pgroup> <mask>?", "<pgroup>", "doctors") == "Why are doctors"
    with pytest.raises(ConfigError, match="must end the prompt"):
        causal_prefix("<cpgroup> are more <mask> than others.", "<cpgroup>", "Doctors")


def test_pair_matrix_and_human_alignment_on_synthetic_scores():
    abc = load_abc()
    slot = "<pgroup>"
    groups = list(abc.groups[slot])
    words = list(dict.fromkeys(w for syns in abc.traits.values() for w in syns))
    rng = np.random.default_rng(3)
    df = pd.DataFrame([(g, w, rng.normal()) for g in groups for w in words], columns=["group", "word", "set"])
    pairs = pair_matrix(df, abc, "set")
    assert pairs.shape == (51, 16)
    g, (left, right) = "doctors", abc.trait_pairs[4]
    sub = df[df.group == g].set_index("word")["set"]
    expected = np.median(sub[list(abc.traits[right])]) - np.median(sub[list(abc.traits[left])])
    # float32 medians (averages of two values) and a difference: 2·f32_sum(2, max|x|), absolute
    tol = 2 * f32_sum(2, float(df["set"].abs().max()))
    assert float(pairs.loc[g].iloc[4]) == pytest.approx(expected, rel=0, abs=tol)
    res, present = human_alignment(pairs, abc, slot)
    assert len(present) == 25 and "average people" not in present  # every human group but the prior's
    assert res.tau_per_group.shape == (25,)
