"""``model.precision=mixed`` against ``float32`` at the level of the metrics (docs/methods.md §12): CLI jobs on
the tiny random checkpoints, their headline numbers within bounds derived from the logits' bound.

The logits' bound is ``test_models_precision``'s (its module docstring): ``mixed`` rounds each product's two
inputs to bfloat16 (u = 2⁻⁹), a block has ~5 products in series, so a logit moves by at most
δ = depth · 3·√10·u · max|logit| (:func:`bf16_chain`, 3σ per layer, the layers' errors adding up). From it:

- a token's log-probability (the picked logit minus the log-sum-exp, a weighted mean of the logits) moves by
  ≤ 2δ, so a sentence log-likelihood over L scored tokens by ≤ 2δ·L (CrowS-Pairs, UnStereoEval);
- an RPAM relative probability p(v, t) (softmax over the attributes' first-token logits, times the mean
  probability of the further subwords) moves by a factor within e^(±4δ), and as p(·, t) sums to ≤ 1 over
  A ∪ B, the association s(t) = mean_A p - mean_B p by ≤ (e^(4δ) - 1) / min(|A|, |B|).

Where float32 itself is not stable the bounds say so: a tiny random model's RPAM probabilities are all ~1/|C|
and s(t) varies across targets by ~1e-7 to 1e-6 (its standard deviation), so a bound on d from the bound on s
(~1e-2) is vacuous (~10⁴ d units) and RPAM d on these models is compared only through its items (the effect size as a function of the
item scores, ``tolerances.f32_effect_size``); how far d moves on real models is measured by
``benchmarks/bench_precision_faithfulness.py``. Every test checks too that ``mixed`` moved something (its
jobs were computed, not read from float32's cache entries) and that its bound is tight enough that a
violation was possible.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from conformance import padded_batch
from family_specs import TINY
from tolerances import bf16_chain, f32_effect_size, model_depth

from jaxassoc.metrics.crows_pairs import DECIMALS
from jaxassoc.metrics.unstereo import LOG10_THRESHOLD
from jaxassoc.models import load_model
from jaxassoc.models.heads import head_logits
from jaxassoc.readouts import rpam_head
from jaxassoc.readouts.crows_pairs import causal_inputs
from jaxassoc.readouts.unstereo import sentence_token_ids


def _max_logit(model, sequences: list[list[int]]) -> float:
    """max |logit| of ``model`` over every position of ``sequences`` (right-padded, padding masked out)."""
    ids, mask = padded_batch(sequences, "right")
    hidden = model.forward(model.params["body"], jnp.asarray(ids), jnp.asarray(mask)).hidden
    return float(jnp.abs(head_logits(model.head, hidden))[mask.astype(bool)].max())


def _sweep(cli, tmp_path, *overrides) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """One CLI sweep over float32 and mixed: {precision: (items, aggregates)}."""
    proc = cli("jaxassoc", "-m", *overrides, "model.precision=float32,mixed", "cache_dir=cache",
               "hydra.sweep.dir=sweep", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = {}
    for items in (tmp_path / "sweep").glob("*/items.parquet"):
        aggregates = pd.read_parquet(items.parent / "aggregates.parquet")
        jobs[aggregates["prov_model_precision"].iloc[0]] = (pd.read_parquet(items), aggregates)
    assert sorted(jobs) == ["float32", "mixed"]
    return jobs


@pytest.mark.slow  # CLI jobs in two precisions (issue 38: the default suite's budget; UnStereoEval's runs there)
def test_crows_pairs_mixed_flips_only_pairs_within_the_logit_bound(tmp_path, tiny_checkpoint, cli):
    """Each sentence log-likelihood within 2δ·L of float32's (L: its tokens scored); a pair's outcome (the two
    scores rounded to DECIMALS, as the authors) can then change only when float32's margin is within the two
    sentences' bounds plus the rounding step, 10^-DECIMALS. The sentence bound is a worst case (every token's
    error at its bound, in one direction): on 2026-12-07 the scores moved by ≤ 0.3 % of it and no pair
    flipped; 70 % of the pairs had margins above it, so a flip of one of those would fail the test."""
    folder = tiny_checkpoint(TINY["gpt2"], n_positions=512)
    jobs = _sweep(cli, tmp_path, "metric=crows_pairs", "dataset.sample=48", "model.name=tiny",
                  f"model.source={folder}")  # fmt: skip
    full, mixed = (jobs[p][0].set_index("pair") for p in ("float32", "mixed"))
    mixed = mixed.loc[full.index]
    model = load_model(folder)
    scale = _max_logit(model, causal_inputs(model, full.reset_index(), "CrowS-Pairs"))
    delta = bf16_chain(model_depth(model), scale)
    moved = {}
    for side in ("sent_more", "sent_less"):
        bound = 2 * delta * full[f"{side}_tokens"]
        moved[side] = (mixed[f"{side}_score"] - full[f"{side}_score"]).abs()
        assert (moved[side] <= bound).all(), (moved[side] / bound).max()
        assert moved[side].max() > 0  # computed in mixed, not float32's cached scores
    margin = (full["sent_more_score"] - full["sent_less_score"]).abs()
    allowed = 2 * delta * (full["sent_more_tokens"] + full["sent_less_tokens"]) + 10.0**-DECIMALS
    flipped = full["outcome"] != mixed["outcome"]
    assert (margin[flipped] <= allowed[flipped]).all()
    assert (margin > allowed).mean() >= 0.5  # most pairs could not flip: a flip there would fail the test
    assert jobs["mixed"][1].set_index("bias_type").loc["all", "n"] == 48


@pytest.mark.slow  # CLI jobs in two precisions (issue 38: the default suite's budget)
def test_unstereo_mixed_changes_only_decisions_within_the_bound_of_the_neutral_band(tmp_path, tiny_checkpoint, cli):
    """UnStereoEval on 40 USE-5 pairs, tiny GPT-2: FM = log P(F) - log P(M) within 2δ·(L_M + L_F) of float32's
    (L: the tokens scored after BOS); a pair's decision (male, neutral, female: |FM| against ln 1.65) can then
    change only when float32's |FM| is within that bound of ln 1.65, and the US score and preference disparity
    move by at most 100 / n per such pair (twice that for the disparity: one pair leaves a side, joins another).
    2026-12-07: FM moved by ≤ 0.1 % of its bound, no decision changed, 5 of 40 pairs were near the band's edge."""
    folder = tiny_checkpoint(TINY["gpt2"], n_positions=512)
    jobs = _sweep(cli, tmp_path, "metric=unstereo", "dataset=use5", "dataset.sample=40", "model.name=tiny",
                  f"model.source={folder}")  # fmt: skip
    full, mixed = (jobs[p][0].set_index("orig_index") for p in ("float32", "mixed"))
    mixed = mixed.loc[full.index]
    model = load_model(folder)
    ids = {g: sentence_token_ids(model, full[f"{g}_template"].tolist()) for g in "MF"}
    delta = bf16_chain(model_depth(model), _max_logit(model, ids["M"] + ids["F"]))
    scored = sum(np.array([len(s) - 1 for s in ids[g]]) for g in "MF")
    bound = 2 * delta * scored
    moved = (mixed["FM_logprob"] - full["FM_logprob"]).abs().to_numpy()
    assert 0 < moved.max() and (moved <= bound).all(), (moved / bound).max()
    threshold = LOG10_THRESHOLD * math.log(10)
    side = {p: np.where(np.abs(f["FM_logprob"]) <= threshold, 0, np.sign(f["FM_logprob"])) for p, f in
            (("float32", full), ("mixed", mixed))}  # fmt: skip
    near = np.abs(np.abs(full["FM_logprob"].to_numpy()) - threshold) <= bound
    changed = side["float32"] != side["mixed"]
    assert not (changed & ~near).any()
    assert (~near).mean() >= 0.5  # most pairs could not change: a change there would fail the test
    a, b = (jobs[p][1].set_index("subset").loc["unconstrained"] for p in ("float32", "mixed"))
    for column in ("us_score", "preference_disparity"):
        assert abs(a[column] - b[column]) <= 2 * 100 * near.sum() / len(full)


def _rpam_file(path, tests: list[str]):
    specs = rpam_head.weat_ws_tests()
    text = "".join(
        f"{t}:\n" + "".join(f"  {k}: [{', '.join(getattr(specs[t], k.lower()))}]\n" for k in "XYAB") for t in tests
    )
    path.write_text(text)
    return path, [specs[t] for t in tests]


@pytest.mark.slow  # CLI jobs in two precisions (issue 38: the default suite's budget; UnStereoEval's runs there)
def test_rpam_mixed_item_scores_are_within_the_bound_and_d_follows_them(tmp_path, tiny_checkpoint, cli):
    """RPAM Test on WEAT-WS C6 and C9 (as a custom file, the tests' own word lists), tiny Llama: every target's
    s(t) within (e^(4δ) - 1) / min(|A|, |B|) of float32's, δ from the largest logit at the prompts and at the
    positions predicting the attributes' further subwords (the states RPAM reads); each test's d within
    ``f32_effect_size`` of float32's for the item scores' largest move (d is a function of the scores only).
    2026-12-07: |Δs| ≤ 4e-8 against bounds of 1.4e-2 (the a priori bound; float32's s vary by ~1e-6), |Δd| 0.012
    (C6) and 0.005 (C9) within bounds of 0.078 and 0.071."""
    folder = tiny_checkpoint(TINY["llama"])
    path, specs = _rpam_file(tmp_path / "ws.yaml", ["C6", "C9"])
    jobs = _sweep(cli, tmp_path, "metric=rpam", "dataset=custom_weat", f"dataset.path={path}", "template=tp1",
                  "model.name=tiny", f"model.source={folder}", "stats.n_bootstrap=50")  # fmt: skip
    (fi, fa), (mi, ma) = jobs["float32"], jobs["mixed"]
    model = load_model(folder)
    for spec in specs:
        states = rpam_head.rpam_test_states(model, spec)
        hidden = jnp.concatenate([states.first_hidden, states.cont_hidden.reshape(-1, states.first_hidden.shape[1])])
        delta = bf16_chain(model_depth(model), float(jnp.abs(head_logits(model.head, hidden)).max()))
        s_bound = math.expm1(4 * delta) / min(len(spec.a), len(spec.b))
        a, b = (frame[frame["test"] == spec.id].set_index(["group", "target"])["score"] for frame in (fi, mi))
        moved = (b.loc[a.index] - a).abs()
        assert 0 < moved.max() <= s_bound
        d_full, d_mixed = (float(g.set_index("test").loc[spec.id, "effect_size"]) for g in (fa, ma))
        d_bound = f32_effect_size(float(moved.max()), a.to_numpy(), d_full)
        assert abs(d_mixed - d_full) <= d_bound, (spec.id, d_full, d_mixed, d_bound)
        assert d_bound < 1  # the items' moves bound d usefully (the a priori bound from s_bound would not)
