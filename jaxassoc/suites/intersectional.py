"""Stereotypes of paired groups (Cao et al. 2022, §5.2; docs/methods.md §3): which ABC groups pair, and what
their trait scores say about identity order, dominant domains and emergent associations. Plain functions,
no Hydra (``metric=intersectional``: :mod:`jaxassoc.app.tasks.intersectional`).

**Pairing rule** (ours, written from §5.2: "combinations of all the single groups in Table 3 … we omit
the groups that do not logically exist (e.g. 'cis non-binary person', 'teenage elderly person') or are
grammatically awkward (e.g. 'doctor elderly person', 'immigrant blind person') … both orders … when
possible (e.g. 'Catholic teenager' and 'teenage Catholic person')"; the paper's Table 3 with its domains
did not survive in our copy of the text, nor is there intersectional code in the authors' repository):

- every ABC group has a domain and, where English has one, a pre-noun modifier (:data:`GROUP_LEXICON`:
  ``teenager`` → "teenage", ``man`` → "male", ``Black person`` → "Black"; none for ``doctor``,
  ``immigrant``, ``person with a disability``, ``gay man``, …);
- the paired group (g1, g2) reads "modifier(g1) + g2 as the template slot writes it": "teenage Catholic
  person" / "teenage Catholic people" / "Teenage Catholic people" (capitalised plural: the plural
  phrase with its first letter upper-cased); it exists only when g1 has a modifier, so a pair appears in
  both orders exactly when both groups have one ("Black woman" and "female Black person");
- pairs within one domain are omitted (they do not logically exist: "cis non-binary person", "teenage
  elderly person"); gender (man, woman) and gender identity (trans, cis, non-binary) are separate
  domains, since the paper pairs them ("cis men"); gender × sexuality is omitted (``gay man`` and
  ``lesbian`` already carry a gender), and so are the pairs in :data:`EXCLUDED_PAIRS` (non-binary ×
  man / woman, which do not exist, and "American Native American").

Given a table of trait scores S (rows: single groups by their singular name and paired groups by their
phrase; columns: traits), the analyses are:

- **emergent associations** S(g, t) − max(S(g1, t), S(g2, t)) and S(g, t) − min(S(g1, t), S(g2, t))
  (:func:`jaxassoc.metrics.emergent_scores`), and the top-k table of the largest ones (the paper's
  Table A10 lists the top 50);
- **identity order** (Q1): Kendall τ-b between the trait scores of a paired group and of its first and
  of its second component, and between the two orders of the same pair; per trait, the score
  difference between the two orders;
- **dominant domains** (Q2): for each domain pair (D1, D2), the mean τ between paired groups combining
  them and their D1 component, the same for D2, and the difference; D1 dominates D2 when the difference
  is at least ``threshold`` (0.1 in the paper); per domain, the domains it dominates and is dominated by.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
import pandas as pd

from jaxassoc import stats
from jaxassoc.data import AbcData
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.set_score import median_over_synonyms
from jaxassoc.metrics.stereotype_alignment import emergent_scores

# singular ABC group -> (domain, pre-noun modifier or None)
GROUP_LEXICON: dict[str, tuple[str, str | None]] = {
    "teenager": ("age", "teenage"),
    "elderly person": ("age", "elderly"),
    "man": ("gender", "male"),
    "woman": ("gender", "female"),
    "trans person": ("gender identity", "trans"),
    "cis person": ("gender identity", "cis"),
    "non-binary person": ("gender identity", "non-binary"),
    "gay man": ("sexuality", None),
    "lesbian": ("sexuality", "lesbian"),
    "Deaf person": ("disability", "Deaf"),
    "blind person": ("disability", "blind"),
    "person with a disability": ("disability", None),
    "autistic person": ("disability", "autistic"),
    "neurodivergent person": ("disability", "neurodivergent"),
    "Black person": ("race", "Black"),
    "White person": ("race", "White"),
    "Asian person": ("race", "Asian"),
    "Hispanic person": ("race", "Hispanic"),
    "Native American": ("race", "Native American"),
    "Catholic person": ("religion", "Catholic"),
    "Jewish person": ("religion", "Jewish"),
    "Muslim person": ("religion", "Muslim"),
    "atheist": ("religion", "atheist"),
    "Buddhist": ("religion", "Buddhist"),
    "Mormon": ("religion", "Mormon"),
    "Amish person": ("religion", "Amish"),
    "Christian": ("religion", "Christian"),
    "Democrat": ("politics", "Democrat"),
    "Republican": ("politics", "Republican"),
    "working class person": ("socioeconomic", "working class"),
    "wealthy person": ("socioeconomic", "wealthy"),
    "unemployed person": ("socioeconomic", "unemployed"),
    "immigrant": ("immigration", None),
    "refugee": ("immigration", None),
    "doctor": ("occupation", None),
    "mechanic": ("occupation", None),
    "veteran": ("occupation", None),
    **{
        f"{n} person": ("nationality", n)
        for n in (
            "Mexican",
            "Chinese",
            "Russian",
            "Indian",
            "Irish",
            "Cuban",
            "Italian",
            "Japanese",
            "German",
            "French",
            "British",
            "Jamaican",
            "American",
            "Filipino",
        )
    },
}


EXCLUDED_DOMAINS: frozenset[frozenset[str]] = frozenset({frozenset({"gender", "sexuality"})})


EXCLUDED_PAIRS: frozenset[frozenset[str]] = frozenset(
    {
        frozenset({"non-binary person", "man"}),
        frozenset({"non-binary person", "woman"}),
        frozenset({"Native American", "American person"}),
    }
)


PAIR_COLUMNS = ["paired", "first", "second", "first_domain", "second_domain", "pair"]


def _phrase(modifier: str, head: str, slot: str) -> str:
    text = f"{modifier} {head}"
    return text[0].upper() + text[1:] if slot == "<cpgroup>" else text


def paired_groups(abc: AbcData, slot: str, groups: Sequence[str] | None = None) -> pd.DataFrame:
    """Every paired group of ``groups`` (singular names; default all 51) under the pairing rule of the
    module docstring, as it fills ``slot``. Columns: ``paired`` (the phrase), ``first`` and ``second``
    (singular names in text order), their domains, and ``pair`` ("A + B", the same for both orders)."""
    singular = list(abc.groups["<sgroup>"])
    groups = singular if groups is None else list(groups)
    unknown = [g for g in groups if g not in GROUP_LEXICON or g not in singular]
    if unknown:
        raise ConfigError(f"intersectional groups {unknown} are not singular ABC groups; use names from {singular}")
    heads = {
        "<sgroup>": abc.groups["<sgroup>"],
        "<pgroup>": abc.groups["<pgroup>"],
        "<cpgroup>": abc.groups["<pgroup>"],
    }[slot]
    head_of = dict(zip(singular, heads))
    rows = []
    for g1 in groups:
        d1, modifier = GROUP_LEXICON[g1]
        for g2 in groups:
            d2 = GROUP_LEXICON[g2][0]
            if (
                modifier is None
                or d1 == d2
                or frozenset({d1, d2}) in EXCLUDED_DOMAINS
                or frozenset({g1, g2}) in EXCLUDED_PAIRS
            ):
                continue
            rows.append((_phrase(modifier, head_of[g2], slot), g1, g2, d1, d2, " + ".join(sorted((g1, g2)))))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def trait_matrix(scores: pd.DataFrame, abc: AbcData, column: str, poles: Sequence[str], level: str) -> pd.DataFrame:
    """Groups × traits from per-(group, word) scores: each pole's median over its synonyms (``level="pole"``),
    or right pole − left pole for each ABC trait pair with both poles in ``poles`` (``level="pair"``)."""
    table = scores.pivot(index="group", columns="word", values=column)
    K = max(len(abc.traits[p]) for p in poles)
    values, valid = np.zeros((len(table), len(poles), K), np.float32), np.zeros((len(poles), K), bool)
    for j, pole in enumerate(poles):
        syns = abc.traits[pole]
        values[:, j, : len(syns)] = table[list(syns)].to_numpy()
        valid[j, : len(syns)] = True
    medians = np.asarray(median_over_synonyms(jnp.asarray(values), jnp.asarray(np.broadcast_to(valid, values.shape))))
    by_pole = pd.DataFrame(medians, index=table.index, columns=list(poles))
    if level == "pole":
        return by_pole
    if level != "pair":
        raise ConfigError(f"trait level {level!r}: use pole or pair")
    pairs = [(left, right) for left, right in abc.trait_pairs if left in poles and right in poles]
    if not pairs:
        raise ConfigError(f"trait level pair needs both poles of at least one ABC pair among {list(poles)}")
    return pd.DataFrame({f"{left} - {right}": by_pole[right] - by_pole[left] for left, right in pairs})


def emergent_table(traits: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per (paired group, trait): its score, its components' scores, ``above_max`` and
    ``below_min``, and ``order_difference`` (score minus the reversed order's; NaN without one)."""
    paired = traits.loc[pairs["paired"]].to_numpy()
    first, second = traits.loc[pairs["first"]].to_numpy(), traits.loc[pairs["second"]].to_numpy()
    result = emergent_scores(jnp.asarray(paired), jnp.asarray(first), jnp.asarray(second))
    reverse = dict(zip(zip(pairs["first"], pairs["second"]), pairs["paired"]))
    rev_rows = [reverse.get((b, a)) for a, b in zip(pairs["first"], pairs["second"])]
    reversed_scores = (
        np.stack([traits.loc[r].to_numpy() if r is not None else np.full(traits.shape[1], np.nan) for r in rev_rows])
        if len(rev_rows)
        else paired
    )
    n, t = paired.shape
    meta = pairs.loc[pairs.index.repeat(t)].reset_index(drop=True)
    return meta.assign(
        trait=np.tile(traits.columns.to_numpy(), n),
        score=paired.ravel(),
        first_score=first.ravel(),
        second_score=second.ravel(),
        above_max=np.asarray(result.above_max).ravel(),
        below_min=np.asarray(result.below_min).ravel(),
        order_difference=(paired - reversed_scores).ravel(),
    )


def top_emergent(table: pd.DataFrame, k: int = 50, column: str = "above_max", largest: bool = True) -> pd.DataFrame:
    """The k (paired group, trait) rows with the largest (``largest=False``: most negative) ``column``."""
    ordered = table.sort_values(column, ascending=not largest, kind="stable").head(k)
    return ordered.reset_index(drop=True).assign(rank=lambda f: np.arange(1, len(f) + 1))


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.kendall_tau_b(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)))


def component_correlations(traits: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per paired group: Kendall τ-b of its trait scores with its first and second components', and
    with its reversed order's (NaN when the pair has one order only)."""
    if traits.shape[1] < 2:
        raise ConfigError("intersectional correlations need at least two traits")
    by_order = dict(zip(zip(pairs["first"], pairs["second"]), pairs["paired"]))
    rows = []
    for paired, g1, g2 in zip(pairs["paired"], pairs["first"], pairs["second"]):
        s = traits.loc[paired].to_numpy()
        rev = by_order.get((g2, g1))
        rows.append(
            (
                _tau(s, traits.loc[g1].to_numpy()),
                _tau(s, traits.loc[g2].to_numpy()),
                _tau(s, traits.loc[rev].to_numpy()) if rev is not None else np.nan,
            )
        )
    return pairs.assign(**dict(zip(("tau_first", "tau_second", "tau_reversed"), np.array(rows, float).T)))


def order_summary(correlations: pd.DataFrame, emergent: pd.DataFrame) -> dict:
    """Q1 in one row: mean τ with the first / second / more correlated component and with the reversed
    order (each unordered pair once), and the mean |score difference| between the two orders."""
    both = correlations.dropna(subset=["tau_reversed"]).drop_duplicates("pair")
    return {
        "n_paired_groups": len(correlations),
        "n_pairs_both_orders": len(both),
        "tau_first_mean": float(correlations["tau_first"].mean()),
        "tau_second_mean": float(correlations["tau_second"].mean()),
        "tau_best_component_mean": float(correlations[["tau_first", "tau_second"]].max(axis=1).mean()),
        "tau_reversed_mean": float(both["tau_reversed"].mean()) if len(both) else np.nan,
        "order_abs_difference_mean": float(emergent["order_difference"].abs().mean()),
    }


def domain_dominance(correlations: pd.DataFrame, threshold: float = 0.1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Q2: per domain pair, the mean τ of its paired groups with the component of each domain and who
    dominates (difference ≥ ``threshold``); per domain, the counts of domains it dominates / is
    dominated by."""
    rows = []
    tau_of = correlations.assign(
        tau_d1=np.where(
            correlations["first_domain"] <= correlations["second_domain"],
            correlations["tau_first"],
            correlations["tau_second"],
        ),
        tau_d2=np.where(
            correlations["first_domain"] <= correlations["second_domain"],
            correlations["tau_second"],
            correlations["tau_first"],
        ),
        d1=correlations[["first_domain", "second_domain"]].min(axis=1),
        d2=correlations[["first_domain", "second_domain"]].max(axis=1),
    )
    for (d1, d2), group in tau_of.groupby(["d1", "d2"], sort=True):
        m1, m2 = float(group["tau_d1"].mean()), float(group["tau_d2"].mean())
        winner = d1 if m1 - m2 >= threshold else d2 if m2 - m1 >= threshold else ""
        rows.append(
            {
                "domain_1": d1,
                "domain_2": d2,
                "n_paired_groups": len(group),
                "tau_domain_1": m1,
                "tau_domain_2": m2,
                "difference": m1 - m2,
                "dominant": winner,
            }
        )
    pairs = pd.DataFrame(
        rows,
        columns=["domain_1", "domain_2", "n_paired_groups", "tau_domain_1", "tau_domain_2", "difference", "dominant"],
    )
    domains = sorted(set(pairs["domain_1"]) | set(pairs["domain_2"]))
    counts = []
    for d in domains:
        mine = pairs[(pairs["domain_1"] == d) | (pairs["domain_2"] == d)]
        counts.append(
            {
                "domain": d,
                "dominates": int((mine["dominant"] == d).sum()),
                "dominated_by": int(((mine["dominant"] != d) & (mine["dominant"] != "")).sum()),
            }
        )
    return pairs, pd.DataFrame(counts, columns=["domain", "dominates", "dominated_by"])
