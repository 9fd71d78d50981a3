"""ABC stereotype measurements (Cao et al. 2022): ILPS, ILPS* and SeT from a model's head inputs at each trait
subword, the score table of every (group, trait word), and its alignment with the human ratings
(docs/methods.md §3). Plain functions, no Hydra.

The prompts and the forward passes that give the head inputs x are readouts (a causal LM's:
:mod:`jaxassoc.readouts.stereotypes`; a masked LM's write-in steps: :mod:`jaxassoc.readouts.stereotypes_mlm`).
:func:`head_terms` turns them into the three scores' terms from one product with the head: ILPS's log P of
the first subword, ILPS*'s chain rule over the subwords, SeT's distance. :func:`causal_terms` runs a causal
LM's prompts chunk by chunk through the on-disk cache, :func:`score_causal` gives the table (each group
minus the prior noun, :func:`scores_from_terms`); a masked LM's: :mod:`jaxassoc.suites.stereotypes_mlm`.
:func:`pair_matrix`, :func:`human_alignment` and :func:`aligned_matrices` compare the scores with the human
ratings; :func:`convergence` and :func:`template_selection` summarise a job's templates.

SeT's solver: the exact one by default; with ``set_optax`` (:class:`OptaxOptions`) every subword's problem
is solved by :func:`~jaxassoc.metrics.set_optax.set_optax` instead, sharded over the model's mesh, and
the table gains its convergence columns. :func:`jaxassoc.suites.stereotypes_shared.shared_set_scores` solves
one ΔA per (group, trait subword) shared by the group's prompts in several templates (docs/methods.md §3.6).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.data import AbcData, load_human_ratings
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.ilps import chain_rule_logprob, first_subword_logprob, word_initial_mask
from jaxassoc.metrics.set_exact import check_set_inputs, set_from_logits
from jaxassoc.metrics.set_optax import SolverSettings, optax_converged, set_optax
from jaxassoc.metrics.set_score import set_word_scores
from jaxassoc.metrics.stereotype_alignment import AlignmentResult, alignment, human_group_indices, pair_scores
from jaxassoc.models import LanguageModel
from jaxassoc.models.heads import head_logits
from jaxassoc.progress import stage
from jaxassoc.readouts.stereotypes import (
    TraitProblems,
    build_problems,
    causal_layout,
    default_words,
    packed_hidden,
    trait_inputs,
)

HEAD_ROWS = 64  # trait steps per call of the head (ILPS, ILPS* and SeT share its logits)


class OptaxOptions(NamedTuple):
    """SeT by :func:`~jaxassoc.metrics.set_optax.set_optax`: its augmented-Lagrangian schedule and ``tol``, the
    constraint violation (logit units) within which a problem counts as converged
    (:func:`~jaxassoc.metrics.set_optax.optax_converged`)."""

    settings: SolverSettings
    tol: float

    def key(self) -> dict:
        """The options as a cache key's part, every field named."""
        return {**self.settings._asdict(), "tol": self.tol}


def collect_terms(parts: dict[str, np.ndarray], shape: tuple[int, int], members, terms: dict[str, np.ndarray]) -> None:
    """Store one chunk's ``terms`` at rows ``members`` of ``parts``, arrays of (problems,) or (problems,
    steps) = ``shape`` made on first use (0 / False where a chunk's step axis is shorter)."""
    for name, values in terms.items():
        if name not in parts:
            parts[name] = np.zeros(shape[: values.ndim], values.dtype)
        if values.ndim == 1:
            parts[name][members] = values
        else:
            parts[name][np.ix_(members, range(values.shape[1]))] = values


def causal_terms(
    model: LanguageModel,
    problems: TraitProblems,
    *,
    batch_size: int = 32,
    cache_dir: Path | None = None,
    log_as: tuple[str, str] | None = None,
    set_optax: OptaxOptions | None = None,
) -> dict[str, np.ndarray]:
    """Per (filler, word) problem: ``first`` and ``chain`` (ILPS / ILPS* terms) and ``distance`` (SeT's
    ‖ΔA‖_F per trait step, 0 where the step is padding), computed chunk by chunk; with ``set_optax``, SeT
    by :func:`optax_set_terms` (and its ``max_violation``, ``converged`` per step).

    Each chunk (:func:`~jaxassoc.readouts.stereotypes.chunk_rows`; ``batch_size`` // 4 packed rows per batch,
    rows of :data:`~jaxassoc.readouts.stereotypes.ROW_LENGTH` tokens or the longest prompt, at most the model's
    context) is stored in ``cache_dir`` as soon as it is done, keyed by the model and the chunk's exact packed
    token ids, so an interrupted run resumes at its first unfinished chunk.
    ``log_as=(job, where)`` logs one stage line per chunk, e.g. ``set: 512 prompts scored (template 3/33,
    chunk 2/6) in 60.1 s``.
    """
    steps, batch_rows, row_length, chunks = causal_layout(model, problems, batch_size)
    parts: dict[str, np.ndarray] = {}
    for c, rows in enumerate(chunks, start=1):
        members = sorted(m for row in rows for m in row)

        def compute():
            hidden = packed_hidden(model, problems.sequences, rows, batch_rows, row_length)
            x, tokens, valid = trait_inputs(hidden, problems, members, steps)
            return head_terms(model, x, tokens, valid, set_optax=set_optax)

        key = {
            "model": model_key(model),
            "rows": [[problems.sequences[m] for m in row] for row in rows],
            "trait_starts": [problems.trait_starts[m] for m in members],
            "steps": steps,
            "batch_rows": batch_rows,
            "row_length": row_length,
        } | ({} if set_optax is None else {"set_optax": set_optax.key()})  # the exact solver's keys unchanged
        with chunk_stage(log_as, c, len(chunks), len(members)):
            terms = cached_arrays(cache_dir, "stereotype_terms", key, compute)
        collect_terms(parts, (len(problems.sequences), steps), members, terms)
    return parts


def chunk_stage(
    log_as: tuple[str, str] | None, chunk: int, chunks: int, prompts: int
) -> contextlib.AbstractContextManager:
    """The stage line of one chunk, ``set: 512 prompts scored (template 3/33, chunk 2/6) in 60.1 s``, or
    nothing when ``log_as`` is None."""
    if log_as is None:
        return contextlib.nullcontext()
    job, where = log_as
    return stage(job, f"prompts scored ({where}, chunk {chunk}/{chunks})", prompts)


@jax.jit
def _head_chunk(head, x, tokens, first_step, word_initial):
    """For flat (trait step) rows: log P(token), ILPS*'s renormalised step term and SeT's distance, from
    one product with the head (the logits are shared by the three). SeT's distance is NaN for a head that
    soft-caps its logits (its constraints are then not linear in the head; :func:`check_set_head`)."""
    logits = head_logits(head, x)
    allowed = jnp.where(first_step[:, None], word_initial[None, :], ~word_initial[None, :])
    step = jax.vmap(lambda z, t, a: chain_rule_logprob(z[None], t[None], jnp.ones(1, bool), a))(logits, tokens, allowed)
    sqnorm = jnp.sum(x * x, axis=-1) + (0.0 if head.b is None else 1.0)
    if head.softcap is None:
        distance = set_from_logits(logits, sqnorm, tokens).distance
    else:
        distance = jnp.full(len(x), jnp.nan, jnp.float32)
    return first_subword_logprob(logits, tokens), step, distance


def check_set_head(model: LanguageModel) -> None:
    """ConfigError when SeT is asked of a model whose head soft-caps its logits (Gemma 2's
    ``final_logit_softcapping``): SeT's margin constraints (``metrics.set_exact``, ``metrics.set_optax``)
    hold for logits linear in the head ``[W | b]``, which capped logits are not."""
    if model.head.softcap is not None:
        raise ConfigError(
            f"metric=set needs logits linear in the output head, but model {model.name!r} soft-caps its logits "
            f"(final_logit_softcapping = {model.head.softcap}): SeT's solvers do not apply to it; use "
            "metric=ilps or metric=ilps_star with this model"
        )


def _flat_head_terms(head, x, tokens, first_step, word_initial, chunk: int = HEAD_ROWS):
    """:func:`_head_chunk` over flat rows, ``chunk`` at a time (the last padded: one compilation)."""
    head = jax.tree.map(jnp.asarray, head)  # on the device once, not per chunk
    n = len(x)
    pad = -n % chunk
    x, tokens, first_step = (
        np.concatenate([a, np.zeros((pad, *a.shape[1:]), a.dtype)]) for a in (x, tokens, first_step)
    )
    parts = [
        _head_chunk(head, *(jnp.asarray(a[at : at + chunk]) for a in (x, tokens, first_step)), word_initial)
        for at in range(0, n + pad, chunk)
    ]
    return [np.concatenate([np.asarray(p[i]) for p in parts])[:n] for i in range(3)]


def marker_kind(model: LanguageModel) -> str:
    """How the tokenizer marks word starts: ``"wordpiece"`` (``##``), ``"sentencepiece"`` (``▁``) or ``"bpe"`` (``Ġ``)."""
    if model.vocab.continuation_marker == "##":
        return "wordpiece"
    return "sentencepiece" if model.vocab.word_initial_marker == "▁" else "bpe"


def head_terms(
    model: LanguageModel,
    x: np.ndarray,
    tokens: np.ndarray,
    valid: np.ndarray,
    *,
    set_optax: OptaxOptions | None = None,
) -> dict[str, np.ndarray]:
    """ILPS's ``first`` (log P of the first subword), ILPS*'s ``chain`` (N,) and SeT's ``distance`` (N, S;
    0 on padding) from the head inputs ``x`` (N, S, D) at each trait subword; ``tokens``, ``valid`` (N, S).
    The head runs on the valid steps only, once for all three scores; with ``set_optax``, SeT's terms come
    from :func:`optax_set_terms` instead."""
    head = model.head
    check_set_inputs(head.W, head.b, x[valid], tokens[valid])
    initial = jnp.asarray(word_initial_mask(model.tokenizer, marker_kind(model), vocab_size=head.W.shape[0]))
    rows, steps = np.nonzero(valid)
    first_flat, step_flat, distance_flat = _flat_head_terms(head, x[valid], tokens[valid], steps == 0, initial)
    first = np.zeros(len(x), np.float32)
    first[rows[steps == 0]] = first_flat[steps == 0]
    chain = np.zeros(len(x), np.float32)
    np.add.at(chain, rows, step_flat)
    if set_optax is not None:
        return {
            "first": first,
            "chain": chain,
            **optax_set_terms(model, x[:, :, None], tokens[:, :, None], valid[:, :, None], set_optax),
        }
    distance = np.zeros(valid.shape, np.float32)
    distance[valid] = distance_flat
    return {"first": first, "chain": chain, "distance": distance}


def optax_set_terms(
    model: LanguageModel, x: np.ndarray, tokens: np.ndarray, valid: np.ndarray, options: OptaxOptions
) -> dict[str, np.ndarray]:
    """SeT by :func:`~jaxassoc.metrics.set_optax.set_optax` for each (problem, step) with a valid context:
    ``x`` (N, S, K, D) head inputs of the K contexts sharing one ΔA, ``tokens``, ``valid`` (N, S, K). The
    problems run in blocks split over the model's mesh. Returns (N, S) ``distance`` (‖ΔA‖_F),
    ``max_violation`` (logit units, over the whole vocabulary) and ``converged``; 0 / False where no
    context is valid."""
    head = model.head
    solved = valid.any(axis=-1)
    result = set_optax(
        head.W,
        head.b,
        x[solved],
        tokens[solved],
        valid[solved],
        settings=options.settings,
        tol=options.tol,
        mesh=model.mesh,
    )
    terms = {
        "distance": np.zeros(solved.shape, np.float32),
        "max_violation": np.zeros(solved.shape, np.float32),
        "converged": np.zeros(solved.shape, bool),
    }
    for name, values in (
        ("distance", result.distance),
        ("max_violation", result.max_violation),
        ("converged", optax_converged(result, options.tol)),
    ):
        terms[name][solved] = np.asarray(values)
    return terms


def set_columns(
    shape: tuple[int, int],
    terms: dict[str, np.ndarray],
    valid: np.ndarray,
    *,
    set_transform: str = "neg_distance",
    set_nan_policy: str = "propagate",
) -> dict[str, np.ndarray]:
    """SeT's columns of the score table, row-major over (group, word) with ``shape`` = (fillers, words), the
    prior noun the last filler: ``set`` (the group's score minus the prior's), ``set_distance_max``, and with
    an optax solve's terms, per row, the group prompt's SeT problems (``set_problems``), how many converged
    (``set_converged``) and their worst violation (``set_max_violation``), and the same of the prior's
    prompt with that word (``prior_set_*``)."""
    distance = terms["distance"]
    set_word = np.asarray(
        set_word_scores(jnp.asarray(distance), jnp.asarray(valid), transform=set_transform, nan_policy=set_nan_policy)
    ).reshape(shape)
    max_distance = np.where(valid, distance, 0.0).max(axis=1).reshape(shape)
    columns = {"set": (set_word[:-1] - set_word[-1]).ravel(), "set_distance_max": max_distance[:-1].ravel()}
    if "converged" in terms:
        stats = {
            "set_problems": valid.sum(axis=1),
            "set_converged": (valid & terms["converged"]).sum(axis=1),
            "set_max_violation": np.where(valid, terms["max_violation"], -np.inf).max(axis=1),
        }
        for name, values in stats.items():
            per_filler = values.reshape(shape)
            columns[name] = per_filler[:-1].ravel()
            columns[f"prior_{name}"] = np.broadcast_to(per_filler[-1], per_filler[:-1].shape).ravel()
    return columns


def scores_from_terms(
    fillers: Sequence[str],
    words: Sequence[str],
    terms: dict[str, np.ndarray],
    valid: np.ndarray,
    *,
    set_transform: str = "neg_distance",
    set_nan_policy: str = "propagate",
) -> pd.DataFrame:
    """The score table from :func:`head_terms`' arrays (row-major over (filler, word), the prior noun the
    last filler): each group minus the prior noun (SeT's columns: :func:`set_columns`)."""
    shape = (len(fillers), len(words))
    first, chain = (np.asarray(terms[k]).reshape(shape) for k in ("first", "chain"))
    return pd.DataFrame(
        {
            "group": np.repeat(list(fillers[:-1]), len(words)),
            "word": np.tile(list(words), len(fillers) - 1),
            "ilps": (first[:-1] - first[-1]).ravel(),
            "ilps_star": (chain[:-1] - chain[-1]).ravel(),
            **set_columns(shape, terms, valid, set_transform=set_transform, set_nan_policy=set_nan_policy),
        }
    )


def score_causal(
    model: LanguageModel,
    abc: AbcData,
    template: str,
    *,
    groups: Sequence[str] | None = None,
    words: Sequence[str] | None = None,
    bos: bool = True,
    set_transform: str = "neg_distance",
    set_nan_policy: str = "propagate",
    batch_size: int = 32,
    cache_dir: Path | None = None,
    log_as: tuple[str, str] | None = None,
    set_optax: OptaxOptions | None = None,
) -> pd.DataFrame:
    """ILPS, ILPS* and SeT of every (group, trait word) in ``template``, each minus the prior noun's.

    Columns: ``group``, ``word``, ``ilps``, ``ilps_star``, ``set`` (and the raw ``set_distance_max``,
    the largest per-subword ‖ΔA‖_F of the group prompt; with ``set_optax``, SeT's convergence columns:
    :func:`set_columns`). ``groups`` default to the template slot's list, ``words`` to every synonym of
    every pole. The prompts are packed end to end and run in chunks (``cache_dir``, ``log_as``: see
    :func:`causal_terms`).
    """
    if model.objective != "causal":
        raise ConfigError(f"score_causal needs a causal LM; {model.name!r} is {model.objective}")
    if bos and model.vocab.bos_id is None:
        raise ConfigError(f"bos=True but {model.name!r} has no BOS token; use bos=False")
    slot = abc.slot_of(template)
    groups = list(abc.groups[slot] if groups is None else groups)
    words = default_words(abc) if words is None else list(words)
    problems = build_problems(model.tokenizer, abc, template, groups, words, bos_id=model.vocab.bos_id if bos else None)
    terms = causal_terms(
        model, problems, batch_size=batch_size, cache_dir=cache_dir, log_as=log_as, set_optax=set_optax
    )
    valid = np.arange(terms["distance"].shape[1]) < np.array([len(t) for t in problems.trait_tokens])[:, None]
    return scores_from_terms(
        problems.fillers, words, terms, valid, set_transform=set_transform, set_nan_policy=set_nan_policy
    )


def pair_matrix(scores: pd.DataFrame, abc: AbcData, metric: str) -> pd.DataFrame:
    """Groups × the 16 trait pairs: median over right-pole synonyms − median over left-pole synonyms."""
    table = scores.pivot(index="group", columns="word", values=metric)
    K = max(len(s) for s in abc.traits.values())

    def padded(pole):
        syns = abc.traits[pole]
        vals = np.zeros((len(table), K), np.float32)
        vals[:, : len(syns)] = table[list(syns)].to_numpy()
        return vals, np.arange(K) < len(syns)

    columns = {}
    for left, right in abc.trait_pairs:
        (lv, lm), (rv, rm) = padded(left), padded(right)
        lm, rm = np.broadcast_to(lm, lv.shape), np.broadcast_to(rm, rv.shape)
        columns[f"{left} - {right}"] = np.asarray(pair_scores(lv, lm, rv, rm))
    return pd.DataFrame(columns, index=table.index)


def human_alignment(pairs: pd.DataFrame, abc: AbcData, slot: str) -> tuple[AlignmentResult, list[str]]:
    """Kendall τ and P@3 against the human ratings, for the human groups among the scored ones
    (:func:`aligned_matrices`)."""
    model, human, present = aligned_matrices(pairs, abc, slot)
    return alignment(model, human), present


def aligned_matrices(pairs: pd.DataFrame, abc: AbcData, slot: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The model's pair scores and the human ratings as (groups, trait pairs) arrays, row by row the same
    human groups (returned, in the study's order): the human groups among the scored ones.

    ``pairs`` is indexed by group names as they fill ``slot`` (the template's). Human groups mapped to
    the prior noun ("average people") are left out: their prior-normalised scores are 0 by construction.
    """
    ratings = load_human_ratings()
    singular = dict(zip(abc.groups[slot], abc.groups["<sgroup>"]))
    scored = {singular[name]: name for name in pairs.index}
    prior = abc.priors["<sgroup>"]
    human_groups = [g for g in dict.fromkeys(ratings.group) if abc.human_groups.get(g) != prior]
    present = [g for g in human_groups if abc.human_groups.get(g) in scored]
    human_group_indices(present, abc.human_groups, list(scored))  # DataError for unmapped groups
    table = ratings.pivot(index="group", columns="trait_pair", values="rating")
    labels = list(dict.fromkeys(ratings.trait_pair))  # the order of abc.trait_pairs
    human = table.loc[present, labels].to_numpy()
    model = pairs.loc[[scored[abc.human_groups[g]] for g in present]].to_numpy()
    return model, human, present


CONVERGENCE = ("set_problems", "set_converged", "set_max_violation")


def convergence(scores: pd.DataFrame, present: list[str], abc, slot: str) -> tuple[dict, pd.DataFrame] | None:
    """SeT's convergence of an optax solve: over every problem behind the table (each prior problem once),
    and per human group in ``present`` order (its own prompts' problems); None for the exact solver."""
    if "set_converged" not in scores:
        return None
    prior = scores.drop_duplicates("word")
    overall = {
        "set_problems": int(scores["set_problems"].sum() + prior["prior_set_problems"].sum()),
        "set_converged": int(scores["set_converged"].sum() + prior["prior_set_converged"].sum()),
        "set_max_violation": float(max(scores["set_max_violation"].max(), prior["prior_set_max_violation"].max())),
    }
    by_group = scores.groupby("group", sort=False).agg(
        set_problems=("set_problems", "sum"),
        set_converged=("set_converged", "sum"),
        set_max_violation=("set_max_violation", "max"),
    )
    per_group = aligned_matrices(by_group, abc, slot)[0]  # rows in the order of ``present``
    return overall, pd.DataFrame(per_group, columns=list(CONVERGENCE)).astype({c: int for c in CONVERGENCE[:2]})


def template_selection(aggregates: pd.DataFrame, n_templates: int, score: str) -> pd.DataFrame:
    """The held-out scores of the template best on the pilot groups, and their mean over the templates (more
    than one: the mean over one template is that template's row)."""
    best = aggregates.loc[aggregates["kendall_tau_pilot"].idxmax()]
    rows = [
        {
            "template_selection": "best template on the pilot groups",
            "template": best["template"],
            "kendall_tau_heldout": best["kendall_tau_heldout"],
            "p_at_3_heldout": best["p_at_3_heldout"],
        }
    ]
    if n_templates > 1:
        rows.append(
            {
                "template_selection": f"mean over {n_templates} templates",
                "template": "",
                "kendall_tau_heldout": aggregates["kendall_tau_heldout"].mean(),
                "p_at_3_heldout": aggregates["p_at_3_heldout"].mean(),
            }
        )
    return pd.DataFrame(rows).assign(score=score)
