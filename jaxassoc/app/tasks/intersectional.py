"""``metric=intersectional dataset=abc``: stereotypes of paired groups (Cao et al. 2022, §5.2;
docs/methods.md §3): identity order, dominant domains, emergent associations and the top-k table.

Single and paired groups (the pairing rule and the analyses: :mod:`jaxassoc.suites.intersectional`) are
scored in one template with :func:`jaxassoc.suites.stereotypes.score_causal` on a causal LM or
:func:`jaxassoc.suites.stereotypes_mlm.score_masked` on a masked LM (the paper's RoBERTa setting)
(ILPS, ILPS* and SeT from the same passes, each minus the prior noun; ``metric.score`` picks which is analysed; cached on disk). A trait is
an ABC pole (median over its synonyms; ``trait_level=pole``, the default, so "more egotistic" reads
directly) or a trait pair (right − left pole; ``trait_level=pair``). Writes ``items`` (every paired group ×
trait: S, its components' S, above-max, below-min, order difference), ``aggregates`` (the top-k
emergent table, the most negative below-min rows, the order summary and the domain table, told apart by
``table``), ``correlations``, ``domains`` and ``intersectional.md`` (the top-k table first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from jaxassoc import data
from jaxassoc.app import model_loading, store, tables
from jaxassoc.app.config import MetricConfig, check_choice, check_range, check_unique
from jaxassoc.app.spec import Job, JobResult, MetricSpec
from jaxassoc.app.tasks.stereotypes import set_options_ignored
from jaxassoc.array_cache import cached_arrays, model_key
from jaxassoc.errors import ConfigError
from jaxassoc.metrics.set_score import NAN_POLICIES, TRANSFORMS
from jaxassoc.progress import stage
from jaxassoc.readouts.stereotypes import is_causal_template
from jaxassoc.suites.intersectional import (
    component_correlations,
    domain_dominance,
    emergent_table,
    order_summary,
    paired_groups,
    top_emergent,
    trait_matrix,
)
from jaxassoc.suites.stereotypes import check_set_head, score_causal
from jaxassoc.suites.stereotypes_mlm import score_masked

SCORES = ("set", "ilps", "ilps_star")
SETTINGS = ("measure", "abc_template", "trait_level")  # columns every aggregate row repeats
TOP_COLUMNS = [
    "rank",
    "paired",
    "first",
    "second",
    "trait",
    "above_max",
    "below_min",
    "score",
    "first_score",
    "second_score",
]


@dataclass
class IntersectionalMetricConfig(MetricConfig):
    score: str = "set"  # set (the paper's choice for §5.2) | ilps | ilps_star
    template: str = "Most <pgroup> are <mask>."  # one ABC template (causal LMs: one whose trait ends the prompt)
    groups: list[str] = field(default_factory=list)  # singular ABC groups to pair ([]: all 51)
    traits: list[str] = field(default_factory=list)  # ABC poles ([]: all 32)
    trait_level: str = "pole"  # pole (median over synonyms) | pair (right - left pole)
    top_k: int = 50  # rows of the emergent table (the paper's Table A10: 50)
    dominance_threshold: float = 0.1  # a domain dominates another by this mean-tau difference (paper: 0.1)
    bos: bool = True  # causal LMs: a BOS token starts each prompt
    set_transform: str = "neg_distance"  # neg_distance (finite default) | log1m (the original's log(1 - d))
    set_nan_policy: str = "propagate"  # propagate | python (the original's Python-min quirk)

    def __post_init__(self) -> None:
        check_choice("metric.score", self.score, SCORES)
        check_unique("metric.groups", self.groups)
        check_unique("metric.traits", self.traits)
        check_choice("metric.trait_level", self.trait_level, ("pole", "pair"))
        check_range("metric.top_k", self.top_k, 1)
        check_range(
            "metric.dominance_threshold", self.dominance_threshold, 0, 2, hint="a difference of mean Kendall taus"
        )
        check_choice("metric.set_transform", self.set_transform, TRANSFORMS)
        check_choice("metric.set_nan_policy", self.set_nan_policy, NAN_POLICIES)


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job leaves unused (the app refuses them when set)."""
    return set_options_ignored(job.metric.score, job.metric.set_transform, job.model.kind)


def _check(job: Job, abc) -> list[str]:
    cfg = job.metric
    if job.dataset.name != "abc":
        raise ConfigError("metric=intersectional pairs the ABC groups of Cao et al. 2022: use dataset=abc")
    if cfg.template not in abc.all_templates:
        raise ConfigError(f"metric.template {cfg.template!r} is not an ABC template: use one of {abc.all_templates}")
    if job.model.kind == "causal" and not is_causal_template(cfg.template):
        raise ConfigError(
            f"metric.template {cfg.template!r}: a causal LM needs an ABC template whose trait ends the prompt"
        )
    poles = list(cfg.traits) or list(abc.traits)
    unknown = [p for p in poles if p not in abc.traits]
    if unknown:
        raise ConfigError(f"metric.traits {unknown} are not ABC poles; use names from {list(abc.traits)}")
    return poles


def run(job: Job) -> JobResult:
    cfg = job.metric
    abc = data.load_abc()
    poles = _check(job, abc)
    slot = abc.slot_of(cfg.template)
    singles = list(cfg.groups) or list(abc.groups["<sgroup>"])
    pairs = paired_groups(abc, slot, singles)
    if pairs.empty:
        raise ConfigError(
            f"metric.groups {singles} form no paired group (same domain or no modifier; see "
            "the pairing rule in jaxassoc.suites.intersectional)"
        )
    in_slot = dict(zip(abc.groups["<sgroup>"], abc.groups[slot]))
    fillers = [in_slot[g] for g in singles] + list(pairs["paired"])
    words = list(dict.fromkeys(w for p in poles for w in abc.traits[p]))
    model = job.language_model()
    if cfg.score == "set":
        check_set_head(model)
    scores = _scores(job, model, abc, fillers, words)
    traits = trait_matrix(scores, abc, cfg.score, poles, cfg.trait_level)
    traits = traits.rename(index={in_slot[g]: g for g in singles})
    emergent = emergent_table(traits, pairs)
    correlations = component_correlations(traits, pairs)
    domains, domain_counts = domain_dominance(correlations, cfg.dominance_threshold)
    top = top_emergent(emergent, cfg.top_k)[TOP_COLUMNS]
    bottom = top_emergent(emergent, cfg.top_k, column="below_min", largest=False)[TOP_COLUMNS]
    order = pd.DataFrame([order_summary(correlations, emergent)])
    for stem, table in (
        ("correlations", correlations),
        ("domains", domains),
        ("domain_counts", domain_counts),
        ("top_emergent", top),
        ("trait_scores", traits.reset_index(names="group")),
    ):
        store.write_table(job.output_dir, stem, table)
    settings = dict(zip(SETTINGS, (cfg.score, cfg.template, cfg.trait_level)))
    _write_markdown(job, top, bottom, order, domains, domain_counts, settings)
    aggregates = pd.concat(
        [
            top.assign(table=f"top_{cfg.top_k}_above_max"),
            bottom.assign(table=f"top_{cfg.top_k}_below_min"),
            order.assign(table="identity_order"),
            domains.assign(table="domain_pairs"),
        ],
        ignore_index=True,
    ).assign(**settings)
    provenance = {
        **model_loading.model_provenance(job.model, model),
        "dataset_version": data.dataset_info("abc").version,
        "n_single_groups": len(singles),
        "n_paired_groups": len(pairs),
        "bos": cfg.bos,
    }
    return JobResult(items=emergent.assign(**settings), aggregates=aggregates, provenance=provenance)


def _scores(job: Job, model: Any, abc: Any, fillers: list[str], words: list[str]) -> pd.DataFrame:
    """Every (group, trait word) prompt's score, computed once and cached (the key: the model, template, groups,
    words and scoring options)."""
    cfg = job.metric
    key = {
        **model_key(model),
        "template": cfg.template,
        "groups": fillers,
        "words": words,
        "bos": cfg.bos,
        "transform": cfg.set_transform,
        "nan_policy": cfg.set_nan_policy,
    }

    options = {
        "groups": fillers,
        "words": words,
        "set_transform": cfg.set_transform,
        "set_nan_policy": cfg.set_nan_policy,
        "batch_size": job.model.batch_size,
    }
    if model.objective == "masked":
        key = {**key, "bos": None, "prompt": "masked write-in"}

    def compute():
        if model.objective == "masked":
            frame = score_masked(model, abc, cfg.template, **options)
        else:
            frame = score_causal(model, abc, cfg.template, bos=cfg.bos, **options)
        return {c: frame[c].to_numpy() for c in frame.columns}

    with stage(
        "intersectional", "(group, trait word) prompts scored or read from the cache", (len(fillers) + 1) * len(words)
    ):
        return pd.DataFrame(cached_arrays(job.cache_dir, "stereotype_scores_intersectional", key, compute))


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The emergent associations above the max and below the min, the identity order and the domains."""
    out = []
    for kind in dict.fromkeys(aggregates["table"]):
        rows = aggregates[aggregates["table"] == kind]
        if kind.startswith("top_"):
            gap = "above_max" if "above" in kind else "below_min"
            columns = ["rank", "paired", "trait", gap, "score", "first_score", "second_score"]
        else:
            columns = [c for c in aggregates.columns if c not in (*TOP_COLUMNS, *SETTINGS, "table")]
        out.append((kind.replace("_", " "), tables.block(rows, columns)))
    return out


def _write_markdown(job, top, bottom, order, domains, domain_counts, settings) -> None:
    cfg = job.metric
    lines = [
        f'# Intersectional groups: {job.model.name}, {cfg.score}, "{cfg.template}", traits by {cfg.trait_level}',
        "",
        f"## Top {len(top)} emergent associations: S(g, t) − max(S(g1, t), S(g2, t))",
        "",
        tables.markdown(top),
        "",
        f"## Top {len(bottom)} below the minimum: S(g, t) − min(S(g1, t), S(g2, t))",
        "",
        tables.markdown(bottom),
        "",
        "## Identity order (Kendall τ-b over traits)",
        "",
        tables.markdown(order),
        "",
        f"## Dominant domains (difference ≥ {cfg.dominance_threshold})",
        "",
        tables.markdown(domains),
        "",
        tables.markdown(domain_counts),
        "",
    ]
    text = "\n".join(lines)
    store.atomic_write(job.output_dir / "intersectional.md", lambda p: p.write_text(text))


SPEC = MetricSpec(
    name="intersectional",
    run=run,
    config=IntersectionalMetricConfig,
    model_kinds=("causal", "masked"),
    title="Intersectional groups",
    description="paired ABC groups: identity order, dominant domains, emergent associations",
    uses=frozenset(),
    ignores=ignored_options,
    views=views,
    effects=(),
    plots=(),
)
