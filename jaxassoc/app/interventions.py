"""What the ``intervention`` group does to a job's model (docs/methods.md §11): ablation, concept erasers bound at a
site, Hard Debias or an eraser of static vectors, and the language-modelling cost reported beside every result
of an intervened model."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import pandas as pd

from jaxassoc.app.config import BIAS_TYPES, ERASERS
from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.errors import ConfigError
from jaxassoc.models.base import LanguageModel

log = logging.getLogger("jaxassoc")


def with_intervention(
    model: LanguageModel,
    cfg: Any,
    *,
    cache_dir: Path | None = None,
    progress: bool = False,
    seed: int = 0,
    bias_term: Any = None,
) -> LanguageModel:
    """``model`` with the job's intervention bound into every forward pass: ``ablate``'s heads and neurons
    zeroed (``models.ablation``), an eraser's fitted map at its site (:func:`eraser_for`), Self-Debias as its
    scoring transform (``model.with_scoring``), ``lora``'s trained adapters (``app.finetuning``, seeded by
    ``seed``, against ``bias_term``: the bias metric's ``MetricSpec.bias_term``); the model itself for ``none``."""
    log = logging.getLogger("jaxassoc")
    if cfg.unused():
        log.info(
            "intervention=%s does not read intervention.%s (unused)", cfg.name, ", intervention.".join(cfg.unused())
        )
    if cfg.name == "none":
        return model
    if cfg.name == "lora":
        from jaxassoc.app.finetuning import lora_model

        adapted = lora_model(model, cfg, seed=seed, cache_dir=cache_dir, progress=progress, bias_term=bias_term)
        log.info("intervention: low-rank adapters on %s (rank %d, %s)", ", ".join(cfg.targets), cfg.rank, cfg.objective)
        return adapted
    if cfg.name == "self_debias":
        log.info("intervention: Self-Debias (%s) of every token probability the metric scores", cfg.bias_type)
        return model.with_scoring(self_debias_of(cfg))
    if cfg.name == "hard_debias":
        raise ConfigError(
            f"intervention=hard_debias transforms static word vectors; model {model.name!r} is a {model.objective} "
            "language model: use intervention=leace, inlp or sentence_debias"
        )
    if cfg.name in ERASERS:
        from jaxassoc.mitigation.site_fit import bound, resolve_site

        eraser = eraser_for(model, cfg, cache_dir=cache_dir, progress=progress)
        site = resolve_site(model, cfg.site)
        log.info("intervention: %s eraser (rank <= %d) bound at %s", cfg.name, eraser.down.shape[-1], site)
        return bound(model, site, eraser)
    from jaxassoc.models.ablation import ablated, label

    heads, neurons = [list(p) for p in cfg.heads], [list(p) for p in cfg.neurons]
    if cfg.from_mediation is not None:
        found = top_components(cfg)
        if found.weights_sha256 != model.provenance.weights_sha256:
            raise ConfigError(
                f"intervention.from_mediation={cfg.from_mediation!r}: {found.path} was computed on other weights "
                f"(sha256 {str(found.weights_sha256)[:12]}...) than model {model.name!r} "
                f"({model.provenance.weights_sha256[:12]}...); its heads and neurons say nothing about this model: "
                "run metric=mediation on it first"
            )
        heads, neurons = heads + found.heads, neurons + found.neurons
    cut = ablated(model, heads, neurons)
    log.info("intervention: %s ablated in every forward pass", label(heads, neurons))
    return cut


def eraser_for(model: LanguageModel, cfg: Any, *, cache_dir: Path | None = None, progress: bool = False):
    """The ``intervention=leace|inlp|sentence_debias`` eraser of ``model`` at ``cfg.site``: fitted on the
    counterfactual sentences of ``cfg.corpus`` for ``cfg.bias_type`` (cached in ``cache_dir``)."""
    from jaxassoc import data
    from jaxassoc.mitigation.site_fit import fit_at_site

    words = data.load_attribute_words(cfg.bias_type)
    corpus = "WikiText-2 (valid)" if cfg.corpus == "wikitext2" else cfg.corpus
    found = data.counterfactual_sentences(
        data.fitting_sentences(cfg.corpus), words, max_sentences=cfg.max_sentences, corpus=corpus
    )
    logging.getLogger("jaxassoc").info(
        "intervention=%s: fitting on %d %s sentences of %s (%s) at %s",
        cfg.name, len(found), words.bias_type, corpus,
        ", ".join(f"{c}: {int((found.labels == i).sum())}" for i, c in enumerate(found.classes)), cfg.site,
    )  # fmt: skip
    return fit_at_site(model, found.tuples, cfg.site, cfg.name, eraser_options(cfg), batch_size=cfg.batch_size,
                       cache_dir=cache_dir, progress=progress)  # fmt: skip


def debiased_vectors(embeddings: StaticEmbeddings, cfg: Any) -> StaticEmbeddings:
    """Static vectors with the job's intervention applied to the whole table: ``hard_debias`` (Bolukbasi et
    al. 2016, gender only: debiaswe's lists), or an eraser fitted on the vectors of the attribute words of
    ``cfg.bias_type`` (each word labelled with its class; SentenceDebias on the word tuples); ``none``: as
    loaded."""
    log = logging.getLogger("jaxassoc")
    if cfg.name == "none":
        return embeddings
    if cfg.name == "hard_debias":
        from jaxassoc.mitigation.hard_debias import hard_debias

        if cfg.bias_type != "gender":
            raise ConfigError(
                f"intervention=hard_debias with intervention.bias_type={cfg.bias_type!r}: Hard Debias uses Bolukbasi "
                "et al.'s gender pairs; use bias_type=gender, or intervention=leace for another concept"
            )
        done = hard_debias(embeddings)
        log.info(
            "intervention=hard_debias: %d words neutralised, %d pairs equalised; missing: %s",
            done.n_neutralized, len(done.equalized), {k: len(v) for k, v in done.missing.items()},
        )  # fmt: skip
        return done.table
    from jaxassoc import data
    from jaxassoc.mitigation.site_fit import fit_eraser

    words = data.load_attribute_words(cfg.bias_type)
    found = [t for t in words.tuples if all(w in embeddings for w in t)]
    if len(found) < 2:
        raise ConfigError(
            f"intervention={cfg.name}: only {len(found)} {words.bias_type} word tuples are in {embeddings.source}'s "
            "vocabulary; an eraser needs at least two"
        )
    vectors = np.stack([[embeddings.matrix[embeddings.index[embeddings.normalise(w)]] for w in t] for t in found])
    labels = np.tile(np.arange(len(words.classes), dtype=np.int32), (len(found), 1))
    options = eraser_options(cfg)
    eraser = fit_eraser(vectors.astype(np.float32), labels, cfg.name, options)
    log.info("intervention=%s: fitted on %d %s word tuples of the vocabulary", cfg.name, len(found), words.bias_type)
    matrix = np.asarray(eraser(jnp.asarray(embeddings.matrix, jnp.float32)))
    return StaticEmbeddings(embeddings.words, matrix, embeddings.lowercase, f"{embeddings.source} ({cfg.name})")


def eraser_options(cfg: Any) -> dict[str, Any]:
    """The fit options of ``intervention=leace|inlp|sentence_debias``, as ``jaxassoc.mitigation``'s fits take them."""
    return {
        "leace": {"method": "orth" if cfg.orth else "leace", "shrinkage": cfg.shrinkage},
        "inlp": {"iterations": cfg.iterations, "classifier": cfg.classifier, "min_accuracy": cfg.min_accuracy},
        "sentence_debias": {"k": cfg.directions},
    }[cfg.name]


def intervention_label(cfg: Any) -> str:
    """What an intervention applied, for tables: ``none``, ``ablate heads 3.1``, ``leace gender @ final_norm``."""
    if cfg.name == "none":
        return "none"
    if cfg.name == "ablate":
        from jaxassoc.models.ablation import label

        mediation = (
            f" + top {cfg.top_heads} heads / {cfg.top_neurons} neurons of mediation" if cfg.from_mediation else ""
        )
        return f"ablate {label([list(p) for p in cfg.heads], [list(p) for p in cfg.neurons])}{mediation}".strip()
    words = Path(cfg.bias_type).stem if cfg.bias_type not in BIAS_TYPES else cfg.bias_type
    if cfg.name in ERASERS:
        return f"{cfg.name} {words} @ {cfg.site}"
    if cfg.name == "lora":
        against = cfg.metric if cfg.objective == "metric" else f"cda {words}"
        return f"lora r{cfg.rank} {'+'.join(cfg.targets)} vs {against}, {cfg.steps} steps"
    return f"{cfg.name} {words}"


@dataclass(frozen=True)
class MediationComponents:
    """The top heads and neurons of a ``metric=mediation`` result, and the weights it was computed on."""

    path: Path
    heads: list[list[int]]
    neurons: list[list[int]]
    weights_sha256: str | None


def top_components(cfg: Any) -> MediationComponents:
    """The ``[layer, unit]`` pairs of the ``cfg.top_heads`` heads and ``cfg.top_neurons`` neurons with the
    largest natural indirect effects in the ``metric=mediation`` result ``cfg.from_mediation`` (its output
    folder or ``aggregates.parquet``), with the weight hash its rows record; ConfigError naming the file."""
    source = cfg.from_mediation
    path = Path(source).expanduser()
    path = path / "aggregates.parquet" if path.is_dir() else path
    try:
        rows = pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise ConfigError(f"intervention.from_mediation={source!r}: cannot read {path} ({e})") from None
    if "component" not in rows or "indirect_effect" not in rows or WEIGHTS_COLUMN not in rows:
        raise ConfigError(f"intervention.from_mediation={source!r}: {path} is not a metric=mediation result")
    out = []
    for component, k in (("head", cfg.top_heads), ("neuron", cfg.top_neurons)):
        part = rows[rows["component"] == component].sort_values("indirect_effect", ascending=False, kind="stable")
        if k > len(part):
            raise ConfigError(f"intervention.top_{component}s={k}: {path} has only {len(part)} {component} rows")
        out.append([[int(r.layer), int(getattr(r, component))] for r in part.head(k).itertuples()])
    return MediationComponents(path, out[0], out[1], rows[WEIGHTS_COLUMN].iloc[0])


WEIGHTS_COLUMN = "prov_model_weights_sha256"
"""The column of a result's rows that records the weights it was computed on (``model_loading.model_provenance``)."""


LM_COST_COLUMNS = ("lm_cost_kind", "lm_cost_tokens", "lm_ppl", "lm_ppl_none")
"""The columns every result of an intervened language model carries (docs/methods.md §11.8): the kind
(``perplexity``, ``pseudo-perplexity``), the WikiText-2 test tokens scored, and the (pseudo-)perplexity with
the intervention and without it (the same model as loaded)."""


def lm_cost_columns(job: Any) -> dict[str, Any]:
    """:data:`LM_COST_COLUMNS` for a job whose intervention changes a language model; ``{}`` for ``none``, static
    vectors or ``intervention.lm_cost_tokens=0``; the kind ``none (no LM head)`` and NaN for an encoder."""
    from jaxassoc.readouts.lm_cost import lm_cost

    cfg = job.intervention
    if cfg.name == "none" or job.model.kind == "static" or cfg.lm_cost_tokens == 0:
        return {}
    model = job.language_model()
    if (
        model.objective == "seq2seq"
        or model.head is None
        or (model.objective == "masked" and model.vocab.mask_id is None)
    ):
        log.info("LM cost: %s has no language-modelling head to score WikiText-2 with", model.name)
        return dict(zip(LM_COST_COLUMNS, ("none (no LM head)", 0, float("nan"), float("nan"))))
    progress = not job.quiet
    cost = lm_cost(model, cfg.lm_cost_tokens, cache_dir=job.cache_dir, progress=progress)
    from jaxassoc.models.lora import without_adapters

    base = lm_cost(
        without_adapters(model).with_edits({}).with_scoring(None),
        cfg.lm_cost_tokens,
        cache_dir=job.cache_dir,
        progress=progress,
    )
    log.info("LM cost: WikiText-2 test %s %.3f with %s, %.3f without (%d tokens)", cost.kind, cost.perplexity,
             intervention_label(cfg), base.perplexity, cost.tokens)  # fmt: skip
    return dict(zip(LM_COST_COLUMNS, (cost.kind, cost.tokens, cost.perplexity, base.perplexity)))


def self_debias_of(cfg: Any):
    """The job's :class:`~jaxassoc.mitigation.SelfDebias` (``intervention=self_debias``)."""
    from jaxassoc.mitigation.self_debias import SelfDebias

    return SelfDebias(cfg.bias_type, cfg.decay, cfg.epsilon)
