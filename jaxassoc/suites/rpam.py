"""RPAM's validation tasks (Hodel et al. 2026, §5, App. B-F) as plain functions over a loaded model: its
probabilities (:mod:`jaxassoc.readouts.rpam`) turned into tests, correlations and scores.

Each task returns ``(items, aggregates)`` DataFrames. The statistics follow docs/methods.md §1:

- WEAT-WS: RPAM Test on C1-C10; "F1" = share of tests with d > 0 (among the tests whose d is defined).
  C7/C8 use the gender terms as targets and the math/science/arts words as attributes by default
  (App. B); ``swap_gender_roles=False`` keeps the listed roles. All tests run in one pass over the union
  of their prompts and continuations (a prompt or continuation shared by tests runs once). Each row says
  which roles were used; a test whose s is constant (up to rounding) has NaN d, p and CI and says why in
  ``undefined_reason``. The word rule of every metric (:func:`jaxassoc.metrics.weat.check_distinct_words`)
  is checked first.
- WS-353: C = every WS-353 word; pair score = mean of p(w2 | w1) and p(w1 | w2); Spearman with humans.
  The softmax over C needs only first-token logits, so continuations run for each pair's partner only.
- Bellezza: RPAM Valence of the 399 words vs human ratings (Spearman and Pearson); Bellezza-kX: seeded
  groups of k words joined "w1 and w2 and ...", valence vs the mean rating (Spearman).
- SST-2: 16 random positives dropped (seeded) to balance 428/428, valence binarised at the median, F1.
- Bellezza downstream (Experiment 3, App. F): Spearman of RPAM Valence vs the model's own 1-5 ratings of
  the words (:func:`jaxassoc.readouts.rpam_downstream.model_ratings`, cached).
- ``normalise=False``: the ablation with full-vocabulary probabilities instead of the softmax over C.
- ``sample=n`` (WS-353 pairs, Bellezza words, SST-2 sentences): a seeded subsample of the items, for
  quick runs; the WS-353 attribute set C is then the words of the sampled pairs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from jaxassoc import data, stats
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.data.weat import WeatSuite
from jaxassoc.errors import InputError
from jaxassoc.metrics import rpam
from jaxassoc.metrics.weat import UNDEFINED_CONSTANT_S
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.rpam import GENDER_ROLE_TESTS, probabilities, task_probabilities
from jaxassoc.readouts.rpam_downstream import model_ratings
from jaxassoc.readouts.rpam_prompts import PromptTemplate, tokenize_attributes
from jaxassoc.stats import StatsOptions
from jaxassoc.suites.weat import check_suite_words, small_test_columns


def weat_ws(
    model: LanguageModel,
    template: PromptTemplate,
    key: jax.Array,
    *,
    suite: str | WeatSuite = "weat_ws",
    swap_gender_roles: bool = True,
    normalise: bool = True,
    options: StatsOptions = StatsOptions(),
    **run_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """RPAM Test on every test of a WEAT suite (a packaged suite's name, or a suite such as a user's own), with
    the permutation test and CI of ``options``."""
    rows, items = [], []
    tests = (data.load_weat_suite(suite) if isinstance(suite, str) else suite).tests
    check_suite_words(tests)
    swapped = [swap_gender_roles and test.id in GENDER_ROLE_TESTS for test in tests]
    tests = [test.with_roles_swapped() if swap else test for test, swap in zip(tests, swapped)]
    ps, _ = task_probabilities(
        model,
        [(t.targets_x + t.targets_y, t.attributes_a + t.attributes_b) for t in tests],
        template,
        normalise=normalise,
        **run_options,
    )
    for test, test_key, swapped, p in zip(tests, jax.random.split(key, len(tests)), swapped, ps):
        x, y, a, b = test.targets_x, test.targets_y, test.attributes_a, test.attributes_b
        n_multi = len(tokenize_attributes(model.tokenizer, a + b, template).multi_token)
        result = rpam.rpam_test(test_key, jnp.asarray(p), n_x=len(x), n_a=len(a), options=options)
        sizes = {"X": len(x), "Y": len(y), "A": len(a), "B": len(b)}
        p_min = options.smallest_p(len(x) + len(y), len(x))
        row = {
            "test": test.id,
            "name": test.name,
            "effect_size": float(result.d),
            "p_value": float(result.p_value),
            "p_exact": bool(result.exact),
            "p_resamples": int(result.n_resamples),
            "ci_low": float(result.ci_low),
            "ci_high": float(result.ci_high),
            "undefined_reason": "" if bool(result.defined) else UNDEFINED_CONSTANT_S,
            "alternative": options.alternative,
            "confidence": options.confidence,
            "n_bootstrap": options.n_bootstrap,
            "roles": "gender terms as targets" if swapped else "as listed",
            "n_targets": len(x) + len(y),
            "n_attributes": len(a) + len(b),
            "n_multi_token_attributes": n_multi,
            **small_test_columns(f"test {test.id}", sizes, (len(x), len(y)), p_min, ci=True),
        }
        rows.append(row)
        items += [
            {"test": test.id, "target": t, "group": "X" if i < len(x) else "Y", "score": float(s)}
            for i, (t, s) in enumerate(zip(x + y, np.asarray(result.associations)))
        ]
    aggregates = pd.DataFrame(rows)
    defined = aggregates["effect_size"].dropna()
    summary = {
        "test": "all",
        "name": "share of tests with d > 0 (WEAT-WS F1)",
        "share_positive": float((defined > 0).mean()) if len(defined) else float("nan"),
        "n_undefined": len(aggregates) - len(defined),
    }
    return pd.DataFrame(items), pd.concat([aggregates, pd.DataFrame([summary])], ignore_index=True)


def subsample(frame: pd.DataFrame, sample: int | None, key: jax.Array | None) -> pd.DataFrame:
    """``sample`` rows drawn without replacement by ``key`` (in their original order); all rows if None."""
    if sample is None or sample >= len(frame):
        return frame
    if sample < 3:
        raise InputError(f"sample={sample}: a correlation needs at least 3 items")
    if key is None:
        raise InputError("sample needs a PRNG key")
    rows = np.sort(np.asarray(jax.random.choice(key, len(frame), (sample,), replace=False)))
    return frame.iloc[rows].reset_index(drop=True)


def wordsim353(
    model: LanguageModel,
    template: PromptTemplate,
    *,
    normalise: bool = True,
    sample: int | None = None,
    key: jax.Array | None = None,
    **run_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """WS-353: C = all words; pair score = mean(p(w2 | w1), p(w1 | w2)); Spearman with the human scores."""
    pairs = subsample(data.load_wordsim353(), sample, key)
    words = sorted(set(pairs["word1"]) | set(pairs["word2"]))
    index = {w: i for i, w in enumerate(words)}
    i1, i2 = pairs["word1"].map(index).to_numpy(), pairs["word2"].map(index).to_numpy()
    needed = np.zeros((len(words), len(words)), dtype=bool)
    needed[i1, i2] = needed[i2, i1] = True  # a pair's score reads each word's continuation after its partner only
    p, inputs = probabilities(model, words, words, template, normalise=normalise, needed=needed, **run_options)
    scores = (p[i1, i2] + p[i2, i1]) / 2
    items = pairs.assign(score=scores)
    rho = stats.spearman_test(jnp.asarray(scores), jnp.asarray(pairs["score"].to_numpy(float)))
    aggregates = pd.DataFrame(
        [
            {
                "benchmark": "WS-353",
                "statistic": "spearman",
                "correlation": float(rho.statistic),
                "p_value": float(rho.p_value),
                "n": len(pairs),
                "n_multi_token_attributes": inputs.n_multi_token,
            }
        ]
    )
    return items, aggregates


def _valence(model, targets, template, *, normalise, **run_options) -> tuple[np.ndarray, int]:
    valence, _, n_multi = _valence_both(model, targets, template, normalise=normalise, **run_options)
    return valence, n_multi


def _valence_both(model, targets, template, *, normalise, **run_options) -> tuple[np.ndarray, np.ndarray, int]:
    """RPAM Valence with ``normalise`` as asked and with the other choice, from the same forward passes."""
    pleasant, unpleasant = data.valence_attributes()
    p, inputs = probabilities(model, targets, pleasant + unpleasant, template, normalise=normalise, **run_options)
    other = rpam.relative_probabilities(
        jnp.asarray(inputs.first_logits),
        jnp.asarray(inputs.continuation),
        jnp.asarray(inputs.log_partition),
        normalise=not normalise,
    )
    valence = [np.asarray(rpam.rpam_valence(jnp.asarray(q), n_pleasant=len(pleasant))) for q in (p, other)]
    return valence[0], valence[1], inputs.n_multi_token


def bellezza(
    model: LanguageModel,
    template: PromptTemplate,
    *,
    normalise: bool = True,
    sample: int | None = None,
    key: jax.Array | None = None,
    **run_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """RPAM Valence of the 399 Bellezza words vs the human ratings.

    The aggregates also hold the other ``normalise`` choice (the ablation of Table 6, or the normalised
    metric when the ablation was asked for): it needs no further forward passes.
    """
    words = subsample(data.load_bellezza(), sample, key)
    valence, other, n_multi = _valence_both(model, list(words["word"]), template, normalise=normalise, **run_options)
    human = jnp.asarray(words["valence"].to_numpy(float))
    rows = []
    for norm, scores in ((normalise, valence), (not normalise, other)):
        for name, test in (("spearman", stats.spearman_test), ("pearson", stats.pearson_test)):
            r = test(jnp.asarray(scores), human)
            rows.append(
                {
                    "benchmark": "Bellezza",
                    "statistic": name,
                    "correlation": float(r.statistic),
                    "p_value": float(r.p_value),
                    "n": len(words),
                    "normalised": norm,
                    "n_multi_token_attributes": n_multi,
                }
            )
    return words[["word", "valence"]].assign(score=valence), pd.DataFrame(rows)


def bellezza_groups(
    model: LanguageModel,
    template: PromptTemplate,
    key: jax.Array,
    *,
    k: int = 5,
    normalise: bool = True,
    **run_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Bellezza-kX (App. F): N/k seeded random groups of k words, "w1 and ... and wk" as one target."""
    words = data.load_bellezza()
    order = np.asarray(jax.random.permutation(key, len(words)))
    groups = order[: len(words) // k * k].reshape(-1, k)
    targets = [" and ".join(words["word"].iloc[g]) for g in groups]
    human = np.array([words["valence"].iloc[g].mean() for g in groups])
    valence, n_multi = _valence(model, targets, template, normalise=normalise, **run_options)
    r = stats.spearman_test(jnp.asarray(valence), jnp.asarray(human))
    aggregates = pd.DataFrame(
        [
            {
                "benchmark": f"Bellezza-{k}X",
                "statistic": "spearman",
                "correlation": float(r.statistic),
                "p_value": float(r.p_value),
                "n": len(groups),
                "n_multi_token_attributes": n_multi,
            }
        ]
    )
    return pd.DataFrame({"target": targets, "human": human, "score": valence}), aggregates


def sst2(
    model: LanguageModel,
    template: PromptTemplate,
    key: jax.Array,
    *,
    normalise: bool = True,
    sample: int | None = None,
    **run_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SST-2 validation, balanced by dropping 16 seeded random positives; valence > median = positive."""
    frame = data.load_sst2()
    positives = np.flatnonzero(frame["label"].to_numpy() == 1)
    n_drop = len(positives) - int((frame["label"] == 0).sum())
    dropped = np.asarray(jax.random.choice(key, positives, (n_drop,), replace=False))
    frame = subsample(frame.drop(index=dropped).reset_index(drop=True), sample, jax.random.fold_in(key, 1))
    valence, n_multi = _valence(model, list(frame["sentence"]), template, normalise=normalise, **run_options)
    predicted = (valence > np.median(valence)).astype(int)
    f1 = stats.f1_score(jnp.asarray(frame["label"].to_numpy()), jnp.asarray(predicted))
    aggregates = pd.DataFrame(
        [
            {
                "benchmark": "SST-2",
                "statistic": "f1",
                "correlation": float(f1),
                "n": len(frame),
                "n_dropped_positives": n_drop,
                "n_multi_token_attributes": n_multi,
            }
        ]
    )
    return frame.assign(score=valence, predicted=predicted), aggregates


def bellezza_downstream(
    model: LanguageModel,
    template: PromptTemplate,
    *,
    chat_template: bool = True,
    max_new_tokens: int = 4,
    normalise: bool = True,
    sample: int | None = None,
    key: jax.Array | None = None,
    **run_options,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Spearman of RPAM Valence (the paper uses TP1) vs the model's own ratings of the 399 Bellezza words.

    With ``cache_dir`` in ``run_options`` the RPAM passes are shared with ``dataset=bellezza`` and the
    generated answers are cached too."""
    items, _ = bellezza(model, template, normalise=normalise, sample=sample, key=key, **run_options)
    words, batch_size = list(items["word"]), run_options.get("batch_size", 32)
    parts = {
        **model_key(model),
        "words": words,
        "chat_template": chat_template,
        "max_new_tokens": max_new_tokens,
        "batch_size": batch_size,
        "decoder": "kv_cache",
    }  # answers of the earlier full re-run decoder miss
    rated = cached_arrays(
        run_options.get("cache_dir"),
        "rpam_ratings",
        parts,
        lambda: {
            column: values.to_numpy()
            for column, values in model_ratings(
                model,
                words,
                chat_template=chat_template,
                max_new_tokens=max_new_tokens,
                batch_size=batch_size,
                progress=run_options.get("progress", False),
            ).items()
        },
    )
    items = items.assign(answer=rated["answer"], rating=rated["rating"])
    kept = items.dropna(subset=["rating"])
    row = {
        "benchmark": "Bellezza downstream",
        "statistic": "spearman",
        "n": len(kept),
        "n_unparsable": len(items) - len(kept),
        "parse_rate": len(kept) / len(items),
        "chat_template": chat_template,
        "max_new_tokens": max_new_tokens,
    }
    if len(kept) >= 3 and kept["rating"].nunique() > 1:
        r = stats.spearman_test(jnp.asarray(kept["score"].to_numpy(float)), jnp.asarray(kept["rating"].to_numpy(float)))
        human = stats.spearman_test(
            jnp.asarray(kept["valence"].to_numpy(float)), jnp.asarray(kept["rating"].to_numpy(float))
        )
        row |= {
            "correlation": float(r.statistic),
            "p_value": float(r.p_value),
            "ratings_vs_human_spearman": float(human.statistic),
        }
    else:  # too few parsed or constant ratings: Spearman is undefined
        row |= {"correlation": float("nan"), "p_value": float("nan"), "ratings_vs_human_spearman": float("nan")}
    return items, pd.DataFrame([row])
