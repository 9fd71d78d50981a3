"""``metric=ilps|ilps_star|set``: stereotype scores after Cao et al. 2022 on a causal or masked LM, aligned
with the human ratings of 25 groups x 16 ABC trait pairs (docs/methods.md §3).

The model's objective picks the path: a causal LM gets one teacher-forced pass per (group, trait word)
with the trait ending the prompt (:func:`~jaxassoc.suites.stereotypes.score_causal`; 33 of the 35
templates, ``bos`` switch), a masked LM (BERT, RoBERTa) one pass per write-in step with one mask per trait
subword (:func:`~jaxassoc.suites.stereotypes_mlm.score_masked`; all 35 templates, ``bos`` unused).
Either gives all three scores, cached on disk, so the three metrics of a sweep share the passes; the
metric's name picks the score whose alignment is reported. Template selection follows the paper: with
several templates, the best one by mean Kendall τ on the pilot groups (Asian, Black, Hispanic,
immigrant) is reported on the held-out groups, beside the average over all templates. CEAT has its own
job (``metric=ceat``, :mod:`jaxassoc.app.tasks.ceat`), as do paired groups (``metric=intersectional``).

SeT's solver (``metric.solver``): the closed-form exact one, or ``optax`` (augmented Lagrangian + L-BFGS,
sharded over the job's mesh), which reports each problem's convergence and can share one ΔA over a group's
prompts in all the templates (``metric.shared_delta``; docs/methods.md §3.6).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.app import model_loading, tables
from jaxassoc.app.config import MetricConfig, check_choice, check_range, check_unique
from jaxassoc.app.spec import Job, JobResult, MetricSpec
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.set_optax import SolverSettings
from jaxassoc.metrics.set_score import NAN_POLICIES, TRANSFORMS
from jaxassoc.metrics.stereotype_alignment import alignment
from jaxassoc.progress import stage
from jaxassoc.readouts.stereotypes import is_causal_template
from jaxassoc.readouts.stereotypes_shared import SLOT
from jaxassoc.stats.bootstrap import MAX_RESAMPLES
from jaxassoc.stats.grouped_kendall import grouped_kendall
from jaxassoc.suites.stereotypes import (
    CONVERGENCE,
    OptaxOptions,
    aligned_matrices,
    check_set_head,
    convergence,
    pair_matrix,
    score_causal,
    template_selection,
)
from jaxassoc.suites.stereotypes_mlm import score_masked
from jaxassoc.suites.stereotypes_shared import shared_set_scores

log = logging.getLogger("jaxassoc")

PILOT_GROUPS = ("Asian people", "Blacks/African Americans", "Hispanic people", "immigrants")
SCORES = ("ilps", "ilps_star", "set")
SOLVERS = ("exact", "optax")
OPTAX_OPTIONS = ("optax_outer_steps", "optax_inner_steps", "optax_tolerance", "shared_delta")
MAX_STEPS = 10_000


@dataclass
class StereotypeMetricConfig(MetricConfig):
    templates: list[str] = field(default_factory=lambda: ["Most <pgroup> are <mask>."])  # or ["all"]
    bos: bool = True  # causal LMs: a BOS token starts each prompt (changes small models markedly); masked: unused
    set_transform: str = "neg_distance"  # neg_distance (default, finite) | log1m (the original's log(1 - d))
    set_nan_policy: str = "propagate"  # propagate | python (the original's Python-min quirk)
    tau_resamples: int = 10_000  # Kendall τ's within-group permutations (p) and group bootstrap draws (CI)
    solver: str = "exact"  # SeT's solver: exact (closed form) | optax (augmented Lagrangian + optax L-BFGS)
    optax_outer_steps: int = SolverSettings().n_outer  # solver=optax: multiplier updates (ρ doubles each, to 10³)
    optax_inner_steps: int = SolverSettings().n_inner  # solver=optax: L-BFGS steps per multiplier update
    optax_tolerance: float = 1e-3  # solver=optax: worst violation (logit units) of a converged problem
    shared_delta: bool = False  # solver=optax: one ΔA per (group, trait subword) shared by all metric.templates

    def __post_init__(self) -> None:
        if not self.templates:
            raise ConfigError("metric.templates is empty: name ABC templates, or [all] for every usable one")
        check_unique("metric.templates", self.templates)
        check_choice("metric.set_transform", self.set_transform, TRANSFORMS)
        check_choice("metric.set_nan_policy", self.set_nan_policy, NAN_POLICIES)
        check_range("metric.tau_resamples", self.tau_resamples, 100, MAX_RESAMPLES, hint="p resolves to 1 / (n + 1)")
        check_choice("metric.solver", self.solver, SOLVERS)
        for key in ("optax_outer_steps", "optax_inner_steps"):
            check_range(f"metric.{key}", getattr(self, key), 1, MAX_STEPS)
        check_range("metric.optax_tolerance", self.optax_tolerance, 0, 1, open_low=True, hint="in logit units")

    def optax_options(self) -> OptaxOptions | None:
        """SeT's optax settings, or None for the exact solver."""
        if self.solver == "exact":
            return None
        settings = SolverSettings(n_outer=self.optax_outer_steps, n_inner=self.optax_inner_steps)
        return OptaxOptions(settings=settings, tol=self.optax_tolerance)


def set_options_ignored(score: str, transform: str, kind: str) -> dict[str, str]:
    """The SeT scoring options a stereotype score leaves unused, and ``bos`` for masked LMs."""
    ignored = {"metric.bos": "masked LMs get no BOS switch"} if kind == "masked" else {}
    if score != "set":
        ignored |= {
            f"metric.{f}": "it shapes the SeT score only (score set)" for f in ("set_transform", "set_nan_policy")
        }
    elif transform != "log1m":
        ignored["metric.set_nan_policy"] = "it matters only where SeT scores are NaN, i.e. with set_transform=log1m"
    return ignored


def solver_options_ignored(score: str, solver: str, templates: list[str]) -> dict[str, str]:
    """SeT's solver options a job leaves unused: all but for score set, the optax ones with the exact solver,
    ``shared_delta`` with a single template (nothing to share)."""
    if score != "set":
        return {f"metric.{f}": "it configures SeT's solver only (score set)" for f in ("solver", *OPTAX_OPTIONS)}
    if solver == "exact":
        return {f"metric.{f}": "it configures metric.solver=optax only" for f in OPTAX_OPTIONS}
    if len(templates) == 1 and templates != ["all"]:
        return {"metric.shared_delta": "one template leaves nothing to share (each context is its own problem)"}
    return {}


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job leaves unused (the app refuses them when set)."""
    cfg = job.metric
    ignored = set_options_ignored(cfg.name, cfg.set_transform, job.model.kind)
    return ignored | solver_options_ignored(cfg.name, cfg.solver, list(cfg.templates))


def tau_note(rows: pd.DataFrame) -> str:
    """How τ's p and CI were computed (the rows' counts), for the table's note."""
    if "tau_permutations" not in rows or rows["tau_permutations"].isna().all():
        return ""
    n = int(rows["tau_permutations"].max())
    level = f"{float(rows['confidence'].max()) * 100:g} %"
    return (
        f"kendall_tau_overall: τ-b over the n_groups x n_trait_pairs cells; p: two-sided, {n:,} permutations of the "
        f"model's scores within each group; CI: {level} percentile bootstrap over groups, {n:,} draws "
        "(docs/methods.md §3.8); the pilot / held-out columns are means of per-group τ over 4 / n_groups − 4 groups"
    )


def usable_templates(abc, objective: str) -> list[str]:
    """The ABC templates a model can score: all 35 for a masked LM, those whose trait ends the prompt
    for a causal one."""
    return [t for t in abc.all_templates if objective == "masked" or is_causal_template(t)]


def _scores(job: Job, model, abc, template: str, where: str) -> pd.DataFrame:
    """score_causal / score_masked (by the model's objective) for the human-rated groups of the template's
    slot, through the on-disk cache: one entry per template, and one per chunk of prompts as it finishes
    (an interrupted run resumes there). ``where`` ("template 3/33") labels the stage lines."""
    cfg, optax = job.metric, _optax(job)
    slot = abc.slot_of(template)
    to_slot = dict(zip(abc.groups["<sgroup>"], abc.groups[slot]))
    groups = [to_slot[s] for s in human_groups(abc)]
    key = {
        **model_key(model),
        "template": template,
        "groups": groups,
        "bos": cfg.bos,
        "transform": cfg.set_transform,
        "nan_policy": cfg.set_nan_policy,
        "batch_size": job.model.batch_size,
    }  # the batches (causal: the packed rows) decide the bits
    options = dict(
        groups=groups,
        set_transform=cfg.set_transform,
        set_nan_policy=cfg.set_nan_policy,
        batch_size=job.model.batch_size,
        set_optax=optax,
    )
    if model.objective == "masked":
        key.update(bos=None, prompt="masked write-in")
    if optax is not None:  # the exact solver's keys unchanged
        key["set_optax"] = optax.key()

    def compute():
        chunked = dict(cache_dir=job.cache_dir, log_as=(job.metric.name, where), **options)
        if model.objective == "masked":
            frame = score_masked(model, abc, template, **chunked)
        else:
            frame = score_causal(model, abc, template, bos=cfg.bos, **chunked)
        return {c: frame[c].to_numpy() for c in frame.columns}

    return pd.DataFrame(cached_arrays(job.cache_dir, "stereotype_scores", key, compute))


def human_groups(abc) -> list[str]:
    """The groups scored: the human-rated ones, in their singular form."""
    return [s for s in dict.fromkeys(abc.human_groups.values()) if s in abc.groups["<sgroup>"]]


def _optax(job: Job) -> OptaxOptions | None:
    """The optax solver's settings when this job's SeT scores use it."""
    return job.metric.optax_options() if job.metric.name == "set" else None


def _shared_scores(job: Job, model, abc, templates: list[str]) -> pd.DataFrame:
    """:func:`~jaxassoc.suites.stereotypes_shared.shared_set_scores` of the human-rated groups over
    ``templates``, through the on-disk cache (one entry for the whole solve)."""
    cfg, optax = job.metric, _optax(job)
    groups = human_groups(abc)
    key = {
        **model_key(model),  # the fingerprint: an ablated model's SeT is another model's
        "templates": templates,
        "groups": groups,
        "bos": cfg.bos if model.objective == "causal" else None,
        "transform": cfg.set_transform,
        "nan_policy": cfg.set_nan_policy,
        "batch_size": job.model.batch_size,
        "set_optax": optax.key(),
    }

    def compute():
        frame = shared_set_scores(
            model,
            abc,
            templates,
            optax,
            groups=groups,
            bos=cfg.bos,
            set_transform=cfg.set_transform,
            set_nan_policy=cfg.set_nan_policy,
            batch_size=job.model.batch_size,
            log_as=cfg.name,
        )
        return {c: frame[c].to_numpy() for c in frame.columns}

    return pd.DataFrame(cached_arrays(job.cache_dir, "stereotype_shared_set", key, compute))


def run(job: Job) -> JobResult:
    cfg, score = job.metric, job.metric.name
    if score not in SCORES:
        raise ConfigError(f"stereotype metric {score!r}: use one of {SCORES}")
    if job.dataset.name != "abc":
        raise ConfigError(f"metric={score} scores the ABC traits and groups of Cao et al. 2022: use dataset=abc")
    abc = data.load_abc()
    usable = usable_templates(abc, job.model.kind)
    templates = usable if cfg.templates == ["all"] else cfg.templates
    for template in templates:
        if template not in usable:
            kind = "ABC templates" if job.model.kind == "masked" else "ABC templates whose trait ends the prompt"
            raise ConfigError(
                f"template {template!r} is not one of the {len(usable)} {kind} "
                f"(model.kind={job.model.kind}); metric.templates=[all] takes every one"
            )
    model = job.language_model()
    if score == "set":
        check_set_head(model)
    if model.objective != job.model.kind:
        raise ConfigError(
            f"model {job.model.name!r} is a {model.objective} LM but model.kind={job.model.kind}: "
            f"set model.kind={model.objective}"
        )
    if cfg.shared_delta:  # one unit: the shared ΔA's scores over every template
        label = f"shared ΔA over {len(templates)} templates"
        units = [(label, SLOT, lambda: _shared_scores(job, model, abc, templates), f"{label} scored")]
    else:
        units = [
            (
                t,
                abc.slot_of(t),
                lambda t=t, w=f"template {i}/{len(templates)}": _scores(job, model, abc, t, w),
                f"template {i}/{len(templates)} {t!r} scored",
            )
            for i, t in enumerate(templates, start=1)
        ]
    items, rows = [], []
    keys = jax.random.split(jax.random.key(job.seed), len(units))
    for (template, slot, scored, line), key in zip(units, keys):
        with stage(score, line):
            scores = scored()
        row, groups = _aligned(job, abc, template, slot, scores, key)
        rows.append(row)
        items.append(groups)
    aggregates = pd.DataFrame(rows)
    if not (score == "set" and cfg.shared_delta):  # one shared ΔA is one row: nothing to select or average
        aggregates = pd.concat([aggregates, template_selection(aggregates, len(templates), score)], ignore_index=True)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": data.dataset_info("abc").version,
        "pilot_groups": list(PILOT_GROUPS),
        "prompt": "masked write-in" if model.objective == "masked" else f"causal, bos={cfg.bos}",
    }
    if score == "set":
        provenance["set_solver"] = solver_description(cfg)
    return JobResult(items=pd.concat(items, ignore_index=True), aggregates=aggregates, provenance=provenance)


def _aligned(job: Job, abc: Any, template: str, slot: str, scores: Any, key: Any) -> tuple[dict, pd.DataFrame]:
    """One template's (or the shared ΔA's) alignment with the human ratings: its aggregate row (Kendall's tau
    with its permutation p and bootstrap CI, P@3, pilot and held-out groups, SeT's convergence) and its
    per-group rows."""
    score, n = job.metric.name, job.metric.tau_resamples
    model_scores, human, present = aligned_matrices(pair_matrix(scores, abc, score), abc, slot)
    result = alignment(model_scores, human)
    tau = grouped_kendall(key, model_scores, human, n_permutations=n, n_resamples=n, confidence=job.stats.confidence)
    taus, p3 = np.asarray(result.tau_per_group), np.asarray(result.p_at_3_per_group)
    pilot = np.array([g in PILOT_GROUPS for g in present])
    converged = convergence(scores, present, abc, slot)
    caveat = unconverged_caveat(template, None if converged is None else converged[0])
    row = {
        "template": template,
        "score": score,
        "kendall_tau_overall": float(result.tau_overall),
        "p_value": float(tau.p_value),
        "ci_low": float(tau.ci_low),
        "ci_high": float(tau.ci_high),
        "n_trait_pairs": human.shape[1],
        "p_at_3_overall": float(result.p_at_3_overall),
        "kendall_tau_pilot": float(np.nanmean(taus[pilot])),
        "kendall_tau_heldout": float(np.nanmean(taus[~pilot])),
        "p_at_3_pilot": float(p3[pilot].mean()),
        "p_at_3_heldout": float(p3[~pilot].mean()),
        "n_groups": len(present),
        "tau_permutations": n,
        "tau_bootstrap": n,
        "confidence": job.stats.confidence,
        **({} if converged is None else converged[0]),
        **({"caveat": caveat} if caveat else {}),
    }
    groups = pd.DataFrame({"template": template, "group": present, "pilot": pilot, "kendall_tau": taus, "p_at_3": p3})
    return row, groups if converged is None else pd.concat([groups, converged[1]], axis=1)


def solver_description(cfg: StereotypeMetricConfig) -> str:
    """SeT's solver and its settings, for the provenance and the table's note."""
    if cfg.solver == "exact":
        return "exact (column squishing, docs/methods.md §3.5)"
    shared = ", one ΔA shared by the templates" if cfg.shared_delta else ""
    return (
        f"optax (augmented Lagrangian, {cfg.optax_outer_steps} x {cfg.optax_inner_steps} L-BFGS steps, converged "
        f"within {cfg.optax_tolerance:g} logit units{shared}; docs/methods.md §3.6)"
    )


def unconverged_caveat(template: str, converged: dict | None) -> str:
    """The caveat of a template's τ and P@3 when some of the SeT problems behind them did not converge
    (logged as a WARNING); empty when all did, or for the exact solver."""
    if converged is None or converged["set_converged"] >= converged["set_problems"]:
        return ""
    missed = converged["set_problems"] - converged["set_converged"]
    caveat = (
        f"τ and P@3 rest on {missed:,} of {converged['set_problems']:,} SeT problems that did not converge "
        f"(worst violation {converged['set_max_violation']:.2g} logit units)"
    )
    log.warning(
        "set: template %r: %s; raise metric.optax_outer_steps / metric.optax_inner_steps, or use metric.solver=exact",
        template,
        caveat,
    )
    return caveat


def convergence_note(rows: pd.DataFrame) -> str:
    """How many SeT problems the optax solver brought to convergence, for the table's note."""
    if "set_converged" not in rows or rows["set_converged"].isna().all():
        return ""
    problems, done = int(rows["set_problems"].sum()), int(rows["set_converged"].sum())
    return (
        f"SeT by optax: {done:,} of {problems:,} problems converged (every constraint within the tolerance over "
        f"the whole vocabulary; worst violation {rows['set_max_violation'].max():.2g} logit units)"
    )


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Kendall tau (with its p, CI and n) and P@3 per template, then the template chosen on the pilot
    groups and (with several templates) the mean over templates, both on the held-out groups."""
    if "template_selection" not in aggregates:  # a shared ΔA: one row, no template selection
        aggregates = aggregates.assign(template_selection=None)
    chosen = aggregates["template_selection"].notna()
    per_template = aggregates[~chosen]
    return [
        (
            "per template",
            tables.with_notes(
                tables.block(
                    per_template,
                    [
                        "template",
                        "n_groups",
                        "n_trait_pairs",
                        "kendall_tau_overall",
                        "ci_low",
                        "ci_high",
                        "p_value",
                        "p_at_3_overall",
                        "kendall_tau_pilot",
                        "kendall_tau_heldout",
                        "p_at_3_pilot",
                        "p_at_3_heldout",
                        *CONVERGENCE,
                        "caveat",
                    ],
                ),
                tau_note(per_template),
                convergence_note(per_template),
            ),
        ),
        (
            "held-out groups",
            tables.block(
                aggregates[chosen] if len(per_template) > 1 else aggregates.iloc[:0],  # one template: its row says it
                ["template_selection", "template", "kendall_tau_heldout", "p_at_3_heldout"],
            ),
        ),
    ]


def _spec(name: str, title: str) -> MetricSpec:
    return MetricSpec(
        name=name,
        run=run,
        config=StereotypeMetricConfig,
        model_kinds=("causal", "masked"),
        title=title,
        description=f"{name} stereotype scores aligned with human ratings (Cao et al. 2022)",
        uses=frozenset({"stats.confidence", "stats.correction"}),
        ignores=ignored_options,
        views=views,
        effects=(),
        plots=(),
    )


ILPS, ILPS_STAR, SET = _spec("ilps", "ILPS"), _spec("ilps_star", "ILPS*"), _spec("set", "SeT")
