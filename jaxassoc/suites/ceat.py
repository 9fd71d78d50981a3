"""CEAT's tests (Guo & Caliskan 2021; Cao et al. 2022, §3.1; docs/methods.md §3) on the per-word context
pools of a language model (:func:`jaxassoc.readouts.ceat.context_pools`). Plain functions, no Hydra.

:func:`run_ceat_suite` runs the kernel :func:`jaxassoc.metrics.ceat.ceat` per test: N draws of one
random context per word (PRNG key folded with the test's position in the suite, so a subset of tests
gives the same numbers), the DerSimonian–Laird combined effect size, its variance, τ² and the p of
``alternative`` (one-sided "greater" by default), plus per-draw summaries and the draws themselves. A
test whose combination is undefined (a draw whose s is constant) has NaN CES and p and says why in
``undefined_reason``. The word rule of every metric (:func:`jaxassoc.metrics.weat.check_distinct_words`)
holds for the tests' sets. A set that loses more than ``max_oov_share`` of its words (fallback ``"drop"``)
is refused. :func:`word_table` lists how many contexts each word got, and how.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.errors import InputError
from jaxassoc.metrics.ceat import ceat, pad_contexts
from jaxassoc.metrics.weat import check_distinct_words
from jaxassoc.readouts.ceat import ContextPools
from jaxassoc.stats.options import DEFAULT_ALTERNATIVE
from jaxassoc.suites.weat import small_test_columns

UNDEFINED_DRAWS = (
    "in a draw the association s(w, A, B) is the same for every target of X ∪ Y up to float "
    "rounding (its effect size is 0/0): CES, its variance and p are undefined"
)
DRAW_QUANTILES = (0.025, 0.5, 0.975)


def _set_of(pools: ContextPools, words: Sequence[str], label: str, max_oov_share: float):
    kept = [w for w in words if pools.counts[pools.words.index(w)] > 0]
    lost = [w for w in words if w not in kept]
    if len(lost) > max_oov_share * len(words):
        raise InputError(
            f"CEAT {label}: {len(lost)} of {len(words)} words have no context and were dropped "
            f"({lost}), more than max_oov_share={max_oov_share}; use fallback word or templates"
        )
    return pad_contexts([pools.of(w) for w in kept]), kept, lost


def run_ceat_suite(
    pools: ContextPools,
    tests: Sequence[data.WeatTest],
    positions: Sequence[int],
    *,
    key: jax.Array,
    n_draws: int = 10_000,
    chunk: int = 1000,
    max_oov_share: float = 0.2,
    alternative: str = DEFAULT_ALTERNATIVE,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """CEAT per test: one aggregate row per test and the per-draw table (``test``, ``draw``,
    ``effect_size``, ``variance``). Test i draws with ``fold_in(key, positions[i])``."""
    rows, draws = [], []
    for test, position in zip(tests, positions):
        sets = (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)
        names = (test.x_name, test.y_name, test.a_name, test.b_name)
        check_distinct_words(f"test {test.id}", sets, names)
        built = [_set_of(pools, words, f"{test.id} {name}", max_oov_share) for words, name in zip(sets, names)]
        res = ceat(
            jax.random.fold_in(key, position),
            *(b[0] for b in built),
            n_draws=n_draws,
            chunk=chunk,
            alternative=alternative,
        )
        es, var = np.asarray(res.effect_sizes), np.asarray(res.variances)
        counts = np.concatenate([np.asarray(b[0].counts) for b in built])
        rows.append(
            {
                "test": test.id,
                "name": test.name,
                **{f"n_{s}": len(b[1]) for s, b in zip("xyab", built)},
                "lost_words": " ".join(w for b in built for w in b[2]),
                "effect_size": float(res.combined.ces),
                "ces": float(res.combined.ces),
                "ces_variance": float(res.combined.variance),
                "ces_se": float(np.sqrt(res.combined.variance)),
                "tau_squared": float(res.combined.tau_squared),
                "p_value": float(res.combined.p_value),
                "alternative": alternative,
                "undefined_reason": "" if np.isfinite(float(res.combined.ces)) else UNDEFINED_DRAWS,
                "n_draws": n_draws,
                "draw_es_mean": float(es.mean()),
                "draw_es_sd": float(es.std(ddof=1)),
                **{f"draw_es_q{q * 100:g}": float(v) for q, v in zip(DRAW_QUANTILES, np.quantile(es, DRAW_QUANTILES))},
                "draw_variance_mean": float(var.mean()),
                "draw_share_positive": float((es > 0).mean()),
                "contexts_per_word_min": int(counts.min()),
                "contexts_per_word_mean": float(counts.mean()),
                **small_test_columns(
                    f"test {test.id}", dict(zip("XYAB", (len(b[1]) for b in built))), None, None, ci=False
                ),
            }
        )
        draws.append(pd.DataFrame({"test": test.id, "draw": np.arange(n_draws), "effect_size": es, "variance": var}))
    return pd.DataFrame(rows), pd.concat(draws, ignore_index=True)


def word_table(pools: ContextPools, tests: Sequence[data.WeatTest]) -> pd.DataFrame:
    """One row per (test, set, word): how many contexts it got and how (corpus or fallback)."""
    rows = []
    for test in tests:
        for role, words in zip("XYAB", (test.targets_x, test.targets_y, test.attributes_a, test.attributes_b)):
            for w in words:
                i = pools.words.index(w)
                rows.append(
                    {"test": test.id, "set": role, "word": w, "n_contexts": int(pools.counts[i]), "how": pools.how[i]}
                )
    return pd.DataFrame(rows)
