"""``metric=ilps|ilps_star|set``: stereotype scores after Cao et al. 2022 on a causal or masked LM, aligned
with the human ratings of 25 groups x 16 ABC trait pairs (docs/methods.md §3).

The model's objective picks the path: a causal LM gets one teacher-forced pass per (group, trait word)
with the trait ending the prompt (:func:`~jaxassoc.readouts.stereotypes.score_causal`; 33 of the 35
templates, ``bos`` switch), a masked LM (BERT, RoBERTa) one pass per write-in step with one mask per trait
subword (:func:`~jaxassoc.readouts.stereotypes_mlm.score_masked`; all 35 templates, ``bos`` unused).
Either gives all three scores, cached on disk, so the three metrics of a sweep share the passes; the
metric's name picks the score whose alignment is reported. Template selection follows the paper: with
several templates, the best one by mean Kendall τ on the pilot groups (Asian, Black, Hispanic,
immigrant) is reported on the held-out groups, beside the average over all templates. CEAT has its own
job (``metric=ceat``, :mod:`jaxassoc.app.tasks.ceat`), as do paired groups (``metric=intersectional``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.app import model_loading, tables
from jaxassoc.app.cache import cached_arrays
from jaxassoc.app.config import MetricConfig, check_choice, check_range, check_unique
from jaxassoc.app.registry import Job, JobResult
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.set_score import NAN_POLICIES, TRANSFORMS
from jaxassoc.metrics.stereotype_alignment import alignment
from jaxassoc.progress import stage
from jaxassoc.readouts.cache import ablation_key
from jaxassoc.readouts.stereotypes import (
    aligned_matrices,
    check_set_head,
    is_causal_template,
    pair_matrix,
    score_causal,
)
from jaxassoc.readouts.stereotypes_mlm import score_masked
from jaxassoc.stats.bootstrap import MAX_RESAMPLES
from jaxassoc.stats.grouped_kendall import grouped_kendall

PILOT_GROUPS = ("Asian people", "Blacks/African Americans", "Hispanic people", "immigrants")
SCORES = ("ilps", "ilps_star", "set")


@dataclass
class StereotypeMetricConfig(MetricConfig):
    templates: list[str] = field(default_factory=lambda: ["Most <pgroup> are <mask>."])  # or ["all"]
    bos: bool = True  # causal LMs: a BOS token starts each prompt (changes small models markedly); masked: unused
    set_transform: str = "neg_distance"  # neg_distance (default, finite) | log1m (the original's log(1 - d))
    set_nan_policy: str = "propagate"  # propagate | python (the original's Python-min quirk)
    tau_resamples: int = 10_000  # Kendall τ's within-group permutations (p) and group bootstrap draws (CI)

    def __post_init__(self) -> None:
        if not self.templates:
            raise ConfigError("metric.templates is empty: name ABC templates, or [all] for every usable one")
        check_unique("metric.templates", self.templates)
        check_choice("metric.set_transform", self.set_transform, TRANSFORMS)
        check_choice("metric.set_nan_policy", self.set_nan_policy, NAN_POLICIES)
        check_range("metric.tau_resamples", self.tau_resamples, 100, MAX_RESAMPLES, hint="p resolves to 1 / (n + 1)")


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


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job leaves unused (the app refuses them when set)."""
    return set_options_ignored(job.metric.name, job.metric.set_transform, job.model.kind)


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
    cfg = job.metric
    slot = abc.slot_of(template)
    to_slot = dict(zip(abc.groups["<sgroup>"], abc.groups[slot]))
    groups = [to_slot[s] for s in dict.fromkeys(abc.human_groups.values()) if s in to_slot]
    key = {
        "weights": model.provenance.weights_sha256,
        **ablation_key(model),
        "tokenizer": model.provenance.tokenizer_sha256,
        "template": template,
        "groups": groups,
        "bos": cfg.bos,
        "transform": cfg.set_transform,
        "nan_policy": cfg.set_nan_policy,
        "dtype": job.model.dtype,
        "batch_size": job.model.batch_size,
    }  # the batches (causal: the packed rows) decide the bits
    options = dict(
        groups=groups,
        set_transform=cfg.set_transform,
        set_nan_policy=cfg.set_nan_policy,
        batch_size=job.model.batch_size,
    )
    if model.objective == "masked":
        key.update(bos=None, prompt="masked write-in")

    def compute():
        chunked = dict(cache_dir=job.cache_dir, log_as=(job.metric.name, where), **options)
        if model.objective == "masked":
            frame = score_masked(model, abc, template, **chunked)
        else:
            frame = score_causal(model, abc, template, bos=cfg.bos, **chunked)
        return {c: frame[c].to_numpy() for c in frame.columns}

    return pd.DataFrame(cached_arrays(job.cache_dir, "stereotype_scores", key, compute))


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
    items, rows = [], []
    keys = jax.random.split(jax.random.key(job.seed), len(templates))
    for i, (template, key) in enumerate(zip(templates, keys), start=1):
        where = f"template {i}/{len(templates)}"
        with stage(score, f"{where} {template!r} scored"):
            scores = _scores(job, model, abc, template, where)
        model_scores, human, present = aligned_matrices(pair_matrix(scores, abc, score), abc, abc.slot_of(template))
        result = alignment(model_scores, human)
        n = cfg.tau_resamples
        tau = grouped_kendall(
            key, model_scores, human, n_permutations=n, n_resamples=n, confidence=job.stats.confidence
        )
        taus, p3 = np.asarray(result.tau_per_group), np.asarray(result.p_at_3_per_group)
        pilot = np.array([g in PILOT_GROUPS for g in present])
        rows.append(
            {
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
            }
        )
        items.append(
            pd.DataFrame({"template": template, "group": present, "pilot": pilot, "kendall_tau": taus, "p_at_3": p3})
        )
    aggregates = pd.DataFrame(rows)
    best = aggregates.loc[aggregates["kendall_tau_pilot"].idxmax()]
    summary_rows = [
        {
            "template_selection": "best template on the pilot groups",
            "template": best["template"],
            "kendall_tau_heldout": best["kendall_tau_heldout"],
            "p_at_3_heldout": best["p_at_3_heldout"],
        }
    ]
    if len(templates) > 1:  # the mean over one template is that template's row
        summary_rows.append(
            {
                "template_selection": f"mean over {len(templates)} templates",
                "template": "",
                "kendall_tau_heldout": aggregates["kendall_tau_heldout"].mean(),
                "p_at_3_heldout": aggregates["p_at_3_heldout"].mean(),
            }
        )
    aggregates = pd.concat([aggregates, pd.DataFrame(summary_rows).assign(score=score)], ignore_index=True)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": data.dataset_info("abc").version,
        "pilot_groups": list(PILOT_GROUPS),
        "prompt": "masked write-in" if model.objective == "masked" else f"causal, bos={cfg.bos}",
    }
    return JobResult(items=pd.concat(items, ignore_index=True), aggregates=aggregates, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Kendall tau (with its p, CI and n) and P@3 per template, then the template chosen on the pilot
    groups and (with several templates) the mean over templates, both on the held-out groups."""
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
                    ],
                ),
                tau_note(per_template),
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
