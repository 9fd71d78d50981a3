"""UnStereoEval with a causal LM: fill the templates and score both sentences (Belem et al. 2024); the
aggregates: :mod:`jaxassoc.suites.unstereo`.

A sentence's score is the summed natural-log probability of all its tokens given a prepended BOS token,
without length normalisation (docs/methods.md §4; the original's ``M_logprob``/``F_logprob``). Sentences are
packed end to end into rows of fixed length (:func:`jaxassoc.models.packing.run_packed`): positions restart
and attention stays within each sentence, and :func:`jaxassoc.models.heads.next_token_logprobs` gives 0
across a sentence boundary and on padding, so a sentence's score does not depend on its neighbours (tested
against transformers scoring each sentence alone). Per-token log-probabilities come back as float32 and
are summed on the host in float64.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from jaxassoc.data import unstereo as data
from jaxassoc.errors import InputError
from jaxassoc.models.base import LanguageModel
from jaxassoc.readouts.sentence_scores import (
    causal_log_likelihoods,
    causal_token_ids,
    pair_arrays,
    pair_log_likelihoods,
    start_token,
)


def sentence_token_ids(
    model: LanguageModel, sentences: Sequence[str], where: Callable[[int], str] | None = None
) -> list[list[int]]:
    """Token ids of each sentence with the model's BOS prepended (once, whatever the tokenizer default);
    ``where(i)`` names sentence i in an error."""
    return causal_token_ids(model, sentences, start_token(model, eos_fallback=False, what="UnStereoEval"), where)


def _origins(
    frame: pd.DataFrame, male: list[str], female: list[str], unique: list[str], source: str
) -> Callable[[int], str]:
    """Names the template behind each of the ``unique`` sentences: ``<source>, line <n>`` for a user's file
    (its ``line`` column), else ``<source> row <r>``, and which pronouns filled it."""
    first: dict[str, str] = {}
    for pronouns, sentences in (("he/his/him", male), ("she/her/her", female)):
        for r, sentence in enumerate(sentences):
            at = f"line {frame['line'].iloc[r]}" if "line" in frame else f"row {r}"
            first.setdefault(sentence, f"{source}, {at}: the template filled with {pronouns}")
    return lambda i: first[unique[i]]


def score_sentences(
    model: LanguageModel,
    sentences: Sequence[str],
    *,
    tokens_per_batch: int = 1024,
    progress: bool = False,
) -> np.ndarray:
    """log P(sentence | BOS): float64 sum of natural-log token probabilities, one per sentence.

    ``tokens_per_batch``: size of each packed batch (rows of 128 tokens, or longer for long sentences).
    """
    if len(sentences) == 0:
        raise InputError("score_sentences needs at least one sentence")
    sequences = sentence_token_ids(model, sentences)
    return causal_log_likelihoods(model, sequences, tokens_per_batch=tokens_per_batch, progress=progress)


def run_unstereo(
    model: LanguageModel,
    dataset_name: str,
    *,
    tokens_per_batch: int = 1024,
    parity_preprocessing: bool = True,
    progress: bool = False,
    rows: Sequence[int] | None = None,
    scorer: Callable[[list[str]], np.ndarray] | None = None,
    frame: pd.DataFrame | None = None,
    source: str | None = None,
) -> pd.DataFrame:
    """Per-pair scores of one dataset (as the original's results files): the dataset's columns plus
    ``M_template``, ``M_num_tokens`` (tokens without BOS), ``M_logprob``, the same with ``F_``,
    ``FM_logprob`` = F − M, ``model``, ``parity_preprocessing``. Each distinct sentence is scored once.
    ``rows``: positions of the dataset's rows to score (e.g. a seeded sample); None scores all.
    ``scorer``: sentences -> log-likelihoods in place of :func:`score_sentences` (e.g. a cached one).
    ``frame``: the rows (``template``, ``max_gender_pmi``) in place of the named dataset's, e.g. a user's
    file (:func:`jaxassoc.data.custom_sentences.load_templates_file`), with ``source`` its name in errors
    (a sentence longer than the context names the file and line of its template)."""
    frame = data.load_dataset(dataset_name) if frame is None else frame
    if rows is not None:
        frame = frame.iloc[list(rows)].reset_index(drop=True)
    male, female = data.fill_templates(frame["template"].tolist(), parity_preprocessing=parity_preprocessing)
    unique = list(dict.fromkeys(male + female))
    ids = sentence_token_ids(model, unique, _origins(frame, male, female, unique, source or dataset_name))
    if scorer is None:
        scorer = functools.partial(score_sentences, model, tokens_per_batch=tokens_per_batch, progress=progress)
    scores = dict(zip(unique, scorer(unique)))
    lengths = dict(zip(unique, (len(seq) - 1 for seq in ids)))
    out = frame.copy()
    for prefix, sentences in (("M", male), ("F", female)):
        out[f"{prefix}_template"] = sentences
        out[f"{prefix}_num_tokens"] = [lengths[s] for s in sentences]
        out[f"{prefix}_logprob"] = [scores[s] for s in sentences]
    out["FM_logprob"] = out["F_logprob"] - out["M_logprob"]
    out["model"] = model.name
    out["parity_preprocessing"] = parity_preprocessing
    return out


BIAS_DATASET = "USE-5"
"""The templates UnStereoEval's fine-tuning bias term trains on (the audit's dataset)."""


def soft_disparity(parts, *, temperature: float = 1.0):
    """A smooth preference disparity as a fraction: the mean over pairs of sigmoid((FM - e) / T) - sigmoid((-FM - e)
    / T), FM = log P(female) - log P(male) and e the neutrality threshold in nats (docs/methods.md §4.4, §13.2);
    the counted disparity (/ 100) as T goes to 0."""
    import jax
    import jax.numpy as jnp

    from jaxassoc.metrics.unstereo import LOG10_THRESHOLD, fm_log_ratio

    fm = fm_log_ratio(parts[0], parts[1])
    edge = LOG10_THRESHOLD * jnp.log(10.0)
    return jnp.mean(jax.nn.sigmoid((fm - edge) / temperature) - jax.nn.sigmoid((-fm - edge) / temperature))[None]


def real_disparity(parts) -> np.ndarray:
    """The preference disparity (pct female - pct male of all pairs, §4.4) as a fraction."""
    from jaxassoc.metrics.unstereo import AUFC_EPSILONS, fm_log_ratio, unstereo_metrics

    fm = fm_log_ratio(np.asarray(parts[0], np.float64), np.asarray(parts[1], np.float64))
    result = unstereo_metrics(fm, np.ones(fm.shape, bool), np.asarray(AUFC_EPSILONS))
    return np.array([float(result.preference_disparity) / 100.0])


def bias_term(model: LanguageModel, bias_type: str, seed: int, *, heldout: float, temperature: float | None = None):
    """UnStereoEval's preference disparity as a fine-tuning bias term (``finetune.bias``): its smooth form
    (:func:`soft_disparity`) over the male / female sentence pairs of :data:`BIAS_DATASET`'s templates, toward 0, the
    templates split into training and held-out ones; the temperature chosen as CrowS-Pairs' is
    (``finetune.bias.choose_temperature``) unless given. Gender only, as the benchmark."""
    from jaxassoc.finetune.bias import BiasTerm, smoothed_setup, split_items

    if bias_type != "gender":
        raise InputError(f"UnStereoEval measures gender only; intervention.bias_type={bias_type!r} has no pairs in it")
    male, female = data.fill_templates(data.load_dataset(BIAS_DATASET)["template"].tolist())
    train, held = split_items(len(male), heldout, seed, f"UnStereoEval {BIAS_DATASET} templates")
    start = start_token(model, eos_fallback=False, what="UnStereoEval")
    arrays = pair_arrays(model, male, female, start)
    term = BiasTerm("unstereo", pair_log_likelihoods, soft_disparity, real_disparity, target=0.0, units="disparity")
    return smoothed_setup(
        model, term, arrays, train, held, temperature, f"UnStereoEval preference disparity of {BIAS_DATASET}"
    )
