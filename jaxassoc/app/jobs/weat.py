"""``metric=weat``: WEAT raw vs ZCA-whitened on static or contextual vectors (ZCA-WEAT paper, Exp. 1-3)."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.app import resolve
from jaxassoc.app.config import MetricConfig
from jaxassoc.app.pipelines.weat import (
    plot_cosine_heatmaps,
    plot_effect_size_heatmap,
    plot_raw_vs_whitened,
    run_anisotropy,
    run_similarity_benchmark,
    run_weat_experiment,
)
from jaxassoc.app.registry import Job, JobResult
from jaxassoc.embeddings.contextual import ContextIndex, ContextualWordVectors, contextual_reference
from jaxassoc.embeddings.whitening import corpus_word_types, fit_zca, reference_sample
from jaxassoc.errors import ConfigError


@dataclass
class WeatMetricConfig(MetricConfig):
    max_oov_share: float = 0.2  # refuse a word set that loses more than this share to the vocabulary
    similarity: bool = True  # static vectors: WS-353 and SimLex-999 rho, raw vs whitened
    anisotropy: bool = True  # mean ± SD pairwise cosine before/after whitening
    layer: int = -1  # contextual: hidden layer to pool (-1: last)
    max_contexts: int = 20  # contextual: sentences per word (Bommasani et al. 2020)
    fallback: str = "word"  # contextual, no context in the corpus: word | templates | drop
    reference_level: str = "token"  # contextual ZCA fit: token | sentence states
    reference_sentences: int = 100_000  # contextual ZCA fit: at most this many corpus sentences


def _corpus_sentences() -> list[str]:
    return data.wikitext2_sentences("test") + data.wikitext2_sentences("valid")


def run(job: Job) -> JobResult:
    cfg, whitening = job.metric, job.whitening
    if whitening.name not in ("none", "zca"):
        raise ConfigError(f"whitening {whitening.name!r}: use none or zca")
    suite = data.load_weat_suite(job.dataset.name)
    key_weat, key_aniso, key_sim = jax.random.split(jax.random.key(job.seed), 3)
    aggregates, provenance = [], {}
    if job.model.kind == "static":
        embeddings = resolve.static_embeddings(job.model)
        vectors = embeddings
        if whitening.name == "zca":
            word_types = (
                corpus_word_types(" ".join(data.load_wikitext2("test") + data.load_wikitext2("valid")).split())
                if whitening.reference == "corpus_word_types"
                else None
            )
            if whitening.reference not in ("corpus_word_types", "vocabulary_uniform"):
                raise ConfigError(f"whitening.reference {whitening.reference!r}: corpus_word_types | vocabulary_uniform")
            reference = reference_sample(
                embeddings, word_types=word_types, corpus_name="WikiText-2 (test+valid)",
                max_items=whitening.max_samples, seed=job.seed,
            )
        provenance.update(resolve.model_provenance(job.model, embeddings))
    else:
        model = resolve.language_model(job.model)
        sentences = _corpus_sentences()
        vectors = ContextualWordVectors(
            model, ContextIndex.build(sentences), layer=cfg.layer, max_contexts=cfg.max_contexts,
            seed=job.seed, fallback=cfg.fallback, batch_size=job.model.batch_size,
        )
        if whitening.name == "zca":
            rng = np.random.default_rng(job.seed)
            if len(sentences) > cfg.reference_sentences:
                sentences = [sentences[i] for i in sorted(rng.choice(len(sentences), cfg.reference_sentences, replace=False))]
            reference = contextual_reference(
                model, sentences, level=cfg.reference_level, layer=cfg.layer,
                max_items=whitening.max_samples, seed=job.seed, batch_size=job.model.batch_size,
            )
        provenance.update(resolve.model_provenance(job.model, model))
    zca = fit_zca(reference.vectors, eps=whitening.eps) if whitening.name == "zca" else None
    table = run_weat_experiment(
        vectors, suite, key=key_weat, whitening=zca,
        whitening_description=reference.description if zca is not None else "",
        ddof=job.stats.ddof, exact_bound=job.stats.exact_bound, n_permutations=job.stats.n_permutations,
        ties=job.stats.ties, n_bootstrap=job.stats.n_bootstrap, alpha=job.stats.alpha,
        max_oov_share=cfg.max_oov_share,
    )
    table["effect_size"] = table["d_whitened"] if zca is not None else table["d_raw"]
    table["effect_size_raw"] = table["d_raw"]
    if zca is not None:
        table["effect_size_whitened"] = table["d_whitened"]
    if isinstance(vectors, ContextualWordVectors):
        how = vectors.coverage()
        table["words_with_contexts"] = sum(h.endswith("contexts") for h in how.values())
        table["words_total"] = len(how)
    aggregates.append(table)
    if zca is not None:
        if cfg.anisotropy:
            a = run_anisotropy(key_aniso, reference.vectors, zca)
            aggregates.append(pd.DataFrame([{
                "test": "anisotropy", "name": "mean ± SD pairwise cosine (2,000 reference vectors)",
                "cosine_mean_raw": a["mean_raw"], "cosine_sd_raw": a["sd_raw"],
                "cosine_mean_whitened": a["mean_whitened"], "cosine_sd_whitened": a["sd_whitened"],
            }]))
        if cfg.similarity and job.model.kind == "static":
            for name, pairs in (("WS-353", data.load_wordsim353()), ("SimLex-999", data.load_simlex999())):
                r = run_similarity_benchmark(embeddings, pairs, zca, key=key_sim, name=name,
                                             n_resamples=job.stats.n_bootstrap, confidence=job.stats.confidence)
                aggregates.append(pd.DataFrame([{"test": "similarity", **r}]))
        if cfg.anisotropy:
            plot_cosine_heatmaps(key_aniso, reference.vectors, zca, job.output_dir / "cosine_matrices.png")
        plot_effect_size_heatmap({job.model.name: table}, job.output_dir / "weat_heatmap.png", alpha=job.stats.alpha)
        plot_raw_vs_whitened({job.model.name: table}, job.output_dir / "weat_raw_vs_whitened.png")
    provenance["dataset_version"] = data.dataset_info(job.dataset.name).version
    provenance["whitening_reference"] = reference.description if zca is not None else None
    return JobResult(items=table, aggregates=pd.concat(aggregates, ignore_index=True), provenance=provenance,
                     summary=_summary(aggregates))


def _summary(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """One line per test (d and p raw/whitened, change class), then anisotropy and similarity."""
    columns = ["test", "d_raw", "p_raw", "d_whitened", "p_whitened", "change", "coverage",
               "cosine_mean_raw", "cosine_mean_whitened", "benchmark", "rho_raw", "rho_whitened", "p_value"]
    table = pd.concat(tables, ignore_index=True)
    return table[[c for c in columns if c in table.columns]].astype(object).where(table.notna(), "")
