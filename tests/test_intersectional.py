"""Intersectional groups (Cao et al. 2022, §5.2): the pairing rule, the emergent / order / domain analyses vs
a hand-written pandas + scipy reference on synthetic scores, and one CLI run on a tiny Llama."""

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from tolerances import f32_chain, f32_sum

from jaxassoc.data import load_abc
from jaxassoc.errors import ConfigError
from jaxassoc.suites.intersectional import (
    GROUP_LEXICON,
    component_correlations,
    domain_dominance,
    emergent_table,
    order_summary,
    paired_groups,
    top_emergent,
    trait_matrix,
)

ABC = load_abc()


def test_every_abc_group_has_a_domain_and_the_paper_examples_are_paired():
    assert set(GROUP_LEXICON) == set(ABC.groups["<sgroup>"])
    sing = set(paired_groups(ABC, "<sgroup>")["paired"])
    plur = set(paired_groups(ABC, "<pgroup>")["paired"])
    cap = set(paired_groups(ABC, "<cpgroup>")["paired"])
    # §5.2's examples, both orders where both groups have a modifier
    assert {"Catholic teenager", "teenage Catholic person", "Black woman", "female Black person"} <= sing
    assert {
        "Hispanic unemployed people",
        "Democrat teenagers",
        "male doctors",
        "trans Democrats",
        "Asian teenagers",
        "teenage Asian people",
        "cis men",
    } <= plur
    assert {"Teenage Catholic people", "Male doctors"} <= cap
    # omitted: not logically existing (same domain), awkward (no modifier), redundant
    for absent in (
        "cis non-binary person",
        "teenage elderly person",
        "doctor elderly person",
        "immigrant blind person",
        "male gay man",
        "American Native American",
        "non-binary man",
        "female non-binary person",
    ):
        assert absent not in sing
    assert not any(p.startswith(("doctor ", "immigrant ", "mechanic ")) for p in sing)


def test_pairs_of_a_subset_both_orders_and_unknown_groups():
    pairs = paired_groups(ABC, "<pgroup>", ["Black person", "woman", "doctor", "man"])
    assert sorted(pairs["paired"]) == sorted(
        [
            "Black women",
            "female Black people",
            "Black doctors",
            "female doctors",
            "Black men",
            "male Black people",
            "male doctors",
        ]
    )
    assert set(pairs.loc[pairs["paired"] == "female doctors", ["first", "second"]].iloc[0]) == {"woman", "doctor"}
    with pytest.raises(ConfigError, match="Martian"):
        paired_groups(ABC, "<sgroup>", ["Martian", "woman"])


def _synthetic():
    singles = ["Black person", "woman", "teenager", "Democrat", "doctor"]
    pairs = paired_groups(ABC, "<sgroup>", singles)
    traits = ["warm", "cold", "powerful", "powerless", "wealthy"]
    rng = np.random.default_rng(3)
    index = singles + list(pairs["paired"])
    values = rng.normal(size=(len(index), len(traits))).round(1)  # ties on purpose (τ-b)
    return pairs, pd.DataFrame(values, index=index, columns=traits)


def test_emergent_and_order_differences_match_a_pandas_reference():
    pairs, scores = _synthetic()
    table = emergent_table(scores, pairs)
    long = scores.stack().rename("S").rename_axis(["group", "trait"]).reset_index()
    ref = pairs.merge(long.rename(columns={"group": "paired"}), on="paired")
    ref = ref.merge(long.rename(columns={"group": "first", "S": "S1"}), on=["first", "trait"])
    ref = ref.merge(long.rename(columns={"group": "second", "S": "S2"}), on=["second", "trait"])
    rev = pairs.rename(columns={"paired": "reversed", "first": "second", "second": "first"})[
        ["reversed", "first", "second"]
    ]
    ref = ref.merge(rev, on=["first", "second"], how="left")
    ref = ref.merge(long.rename(columns={"group": "reversed", "S": "S_rev"}), on=["reversed", "trait"], how="left")
    ref["above_max"] = ref["S"] - ref[["S1", "S2"]].max(axis=1)
    ref["below_min"] = ref["S"] - ref[["S1", "S2"]].min(axis=1)
    ref["order_difference"] = ref["S"] - ref["S_rev"]
    got = table.set_index(["paired", "trait"]).sort_index()
    ref = ref.set_index(["paired", "trait"]).sort_index()
    assert len(got) == len(ref) == len(pairs) * scores.shape[1]
    for ours, theirs in (
        ("score", "S"),
        ("first_score", "S1"),
        ("second_score", "S2"),
        ("above_max", "above_max"),
        ("below_min", "below_min"),
        ("order_difference", "order_difference"),
    ):
        # emergent_scores runs in float32: each score rounds (u relative), a difference rounds once:
        # f32_sum(2, max|S|) (rtol=atol=1e-6 had been just below it for |S| ~ 3)
        np.testing.assert_allclose(got[ours], ref[theirs], rtol=0, atol=f32_sum(2, float(np.abs(scores.values).max())))
    assert got["order_difference"].isna().sum() == ref["S_rev"].isna().sum() > 0  # doctor has one order only

    top = top_emergent(table, 7)
    expected = ref["above_max"].sort_values(ascending=False).head(7)
    tol = f32_sum(2, float(np.abs(scores.values).max()))
    np.testing.assert_allclose(top["above_max"], expected.to_numpy(), rtol=0, atol=tol)
    assert top["rank"].tolist() == list(range(1, 8))
    bottom = top_emergent(table, 3, column="below_min", largest=False)
    np.testing.assert_allclose(bottom["below_min"], ref["below_min"].nsmallest(3).to_numpy(), rtol=0, atol=tol)


def test_correlations_order_summary_and_dominant_domains_match_scipy_and_pandas():
    pairs, scores = _synthetic()
    corr = component_correlations(scores, pairs)
    tau = lambda a, b: scipy.stats.kendalltau(scores.loc[a], scores.loc[b]).statistic  # noqa: E731
    by_order = {(f, s): p for p, f, s in zip(pairs["paired"], pairs["first"], pairs["second"])}
    # τ-b in float32: the ties and pair counts are exact (equal float64 values stay equal), only the final
    # ratio and square root round: a few u, atol=1e-6; the means below are float64 of the same values
    for row in corr.itertuples():
        np.testing.assert_allclose(row.tau_first, tau(row.paired, row.first), atol=1e-6)
        np.testing.assert_allclose(row.tau_second, tau(row.paired, row.second), atol=1e-6)
        rev = by_order.get((row.second, row.first))
        if rev is None:
            assert np.isnan(row.tau_reversed)
        else:
            np.testing.assert_allclose(row.tau_reversed, tau(row.paired, rev), atol=1e-6)
    summary = order_summary(corr, emergent_table(scores, pairs))
    np.testing.assert_allclose(summary["tau_first_mean"], corr["tau_first"].mean())
    np.testing.assert_allclose(summary["tau_best_component_mean"], np.maximum(corr.tau_first, corr.tau_second).mean())
    assert summary["n_pairs_both_orders"] == corr.dropna(subset=["tau_reversed"])["pair"].nunique()

    domains, counts = domain_dominance(corr, threshold=0.1)
    # reference: for each unordered domain pair, the mean τ with the component from each domain
    rows = []
    for r in corr.itertuples():
        rows += [
            (frozenset({r.first_domain, r.second_domain}), r.first_domain, r.tau_first),
            (frozenset({r.first_domain, r.second_domain}), r.second_domain, r.tau_second),
        ]
    ref = pd.DataFrame(rows, columns=["key", "domain", "tau"]).groupby(["key", "domain"])["tau"].mean()
    for row in domains.itertuples():
        key = frozenset({row.domain_1, row.domain_2})
        np.testing.assert_allclose(
            [row.tau_domain_1, row.tau_domain_2], [ref[(key, row.domain_1)], ref[(key, row.domain_2)]], atol=1e-6
        )
        diff = ref[(key, row.domain_1)] - ref[(key, row.domain_2)]
        assert row.dominant == (row.domain_1 if diff >= 0.1 else row.domain_2 if diff <= -0.1 else "")
    for row in counts.itertuples():
        mine = domains[(domains.domain_1 == row.domain) | (domains.domain_2 == row.domain)]
        assert row.dominates == (mine.dominant == row.domain).sum()
        assert row.dominated_by == ((mine.dominant != row.domain) & (mine.dominant != "")).sum()
    assert (
        len(domains) == corr.assign(k=corr[["first_domain", "second_domain"]].apply(frozenset, axis=1))["k"].nunique()
    )


def test_trait_matrix_medians_and_pairs():
    poles = ["powerless", "powerful", "warm"]
    words = [w for p in poles for w in ABC.traits[p]]
    rng = np.random.default_rng(0)
    scores = pd.DataFrame([(g, w, rng.normal()) for g in ("a", "b") for w in words], columns=["group", "word", "set"])
    by_pole = trait_matrix(scores, ABC, "set", poles, "pole")
    tol = f32_sum(2, float(np.abs(scores["set"]).max()))
    for g in ("a", "b"):
        for p in poles:
            expected = np.median(scores[(scores.group == g) & scores.word.isin(ABC.traits[p])]["set"])
            # float32 medians: the inputs round (u relative) and a median of an even count averages two
            # values that may cancel: absolute f32_sum(2, max|x|) (rtol=1e-6 fails for a median near 0)
            np.testing.assert_allclose(by_pole.loc[g, p], expected, rtol=0, atol=tol)
    by_pair = trait_matrix(scores, ABC, "set", poles, "pair")
    assert list(by_pair.columns) == ["powerless - powerful"]
    # a float32 difference of those medians against the float64 one: 2·tol
    diff = by_pole["powerful"] - by_pole["powerless"]
    np.testing.assert_allclose(by_pair["powerless - powerful"], diff, rtol=0, atol=2 * tol)
    with pytest.raises(ConfigError, match="pair"):
        trait_matrix(scores, ABC, "set", ["warm"], "pair")


def test_intersectional_cli_on_a_tiny_llama(tmp_path, tiny_checkpoint, cli):
    folder = tiny_checkpoint("llama", max_position_embeddings=128)
    proc = cli(
        "jaxassoc",
        "metric=intersectional",
        "dataset=abc",
        "model.name=tiny",
        f"model.source={folder}",
        "metric.groups=[Black person,woman,teenager,doctor]",
        "metric.traits=[warm,cold,powerful,powerless]",
        "metric.top_k=5",
        "hydra.run.dir=run",
        "cache_dir=null",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = tmp_path / "run"
    items = pd.read_parquet(run / "items.parquet")
    pairs = paired_groups(ABC, "<pgroup>", ["Black person", "woman", "teenager", "doctor"])
    assert len(items) == len(pairs) * 4 and set(items["trait"]) == {"warm", "cold", "powerful", "powerless"}
    agg = pd.read_parquet(run / "aggregates.parquet")
    top = agg[agg["table"] == "top_5_above_max"]
    assert len(top) == 5 and np.allclose(top["above_max"], items["above_max"].nlargest(5))
    assert set(agg["table"]) == {"top_5_above_max", "top_5_below_min", "identity_order", "domain_pairs"}
    scores = pd.read_parquet(run / "trait_scores.parquet").set_index("group")
    # a float32 difference of the stored scores (f32_sum(2, max|score|)) against the float64 one
    tol = f32_sum(2, float(items[["score", "first_score", "second_score"]].abs().to_numpy().max()))
    np.testing.assert_allclose(
        items["above_max"], items["score"] - items[["first_score", "second_score"]].max(axis=1), rtol=0, atol=tol
    )
    row = items[(items.paired == "Black women") & (items.trait == "warm")].iloc[0]
    assert (row.first_score, row.second_score, row.score) == (
        scores.loc["Black person", "warm"],
        scores.loc["woman", "warm"],
        scores.loc["Black women", "warm"],
    )
    text = (run / "intersectional.md").read_text()
    assert "Top 5 emergent associations" in text and top.iloc[0]["paired"] in text


@pytest.mark.slow
def test_intersectional_cli_on_a_tiny_roberta_uses_the_masked_path(tmp_path, tiny_checkpoint, cli):
    from jaxassoc.models.loading import load_model
    from jaxassoc.suites.stereotypes_mlm import score_masked

    folder = tiny_checkpoint("roberta")
    template = "<cpgroup> are more <mask> than others."  # the trait is not at the end: masked LMs only
    proc = cli(
        "jaxassoc",
        "metric=intersectional",
        "dataset=abc",
        "model=roberta-base",
        "model.name=tiny",
        f"model.source={folder}",
        f"metric.template='{template}'",
        "metric.groups=[Black person,woman]",
        "metric.traits=[warm,cold]",
        "metric.top_k=3",
        "hydra.run.dir=run",
        "cache_dir=null",
        cwd=tmp_path,
        env={"HYDRA_FULL_ERROR": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    scores = pd.read_parquet(tmp_path / "run" / "trait_scores.parquet").set_index("group")
    pairs = paired_groups(ABC, "<cpgroup>", ["Black person", "woman"])
    fillers = {g: ABC.groups["<cpgroup>"][ABC.groups["<sgroup>"].index(g)] for g in ("Black person", "woman")}
    fillers.update({p: p for p in pairs["paired"]})
    words = list(dict.fromkeys(ABC.traits["warm"] + ABC.traits["cold"]))
    direct = score_masked(load_model(folder), ABC, template, groups=list(fillers.values()), words=words)
    warm = direct[direct.word.isin(ABC.traits["warm"])].groupby("group")["set"].median()
    assert set(scores.index) == set(fillers)
    for group, filler in fillers.items():
        # the same masked readout in other batches: hidden states within f32_chain of the 2 layers and the MLM
        # head, relative (rtol=1e-6 had been below it)
        np.testing.assert_allclose(scores.loc[group, "warm"], warm[filler], rtol=f32_chain(3, 64, 1.0))
