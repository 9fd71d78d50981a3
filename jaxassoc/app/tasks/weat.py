"""``metric=weat``: WEAT raw vs ZCA-whitened on static or contextual vectors (ZCA-WEAT paper, Exp. 1-3);
``metric.single_category=true``: SC-WEAT of every target word with its permutation p (docs/methods.md §2.4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import matplotlib
import numpy as np
import pandas as pd

from jaxassoc import data
from jaxassoc.app import datasets, model_loading, store, tables
from jaxassoc.app.config import MetricConfig, check_choice, check_corpus, check_range
from jaxassoc.app.spec import (
    D_RAW_AND_WHITENED,
    EFFECT_PLOTS,
    LANGUAGE_MODELS,
    RAW_VS_WHITENED,
    Job,
    JobResult,
    MetricSpec,
)
from jaxassoc.embeddings.contextual import ContextIndex, ContextualWordVectors
from jaxassoc.embeddings.static import StaticEmbeddings
from jaxassoc.embeddings.whitening import ZcaStats, apply_zca, corpus_word_types, fit_zca, reference_sample, save_zca
from jaxassoc.io import atomic_write
from jaxassoc.metrics.anisotropy import cosine_matrix, sample_rows
from jaxassoc.progress import stage
from jaxassoc.readouts.vectors import cached_reference, cached_sentence_vectors, prefetch_word_vectors, suite_words
from jaxassoc.suites.weat import (
    CHANGE_CLASSES,
    check_suite_words,
    run_anisotropy,
    run_sc_weat_experiment,
    run_similarity_benchmark,
    run_weat_experiment,
    similarity_row,
    static_stsb,
)

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Polygon  # noqa: E402


@dataclass
class WeatMetricConfig(MetricConfig):
    max_oov_share: float = 0.2  # refuse a word set that loses more than this share to the vocabulary
    similarity: bool = True  # WS-353, SimLex-999 and STS-B rho, raw vs whitened (needs whitening=zca)
    anisotropy: bool = True  # mean ± SD pairwise cosine before/after whitening
    layer: int = -1  # contextual: hidden layer to pool (-1: last)
    max_contexts: int = 20  # contextual: sentences per word (Bommasani et al. 2020)
    fallback: str = "word"  # contextual, no context in the corpus: word | templates | drop
    reference_level: str = "token"  # contextual ZCA fit: token | sentence states
    reference_sentences: int = 100_000  # contextual ZCA fit: at most this many corpus sentences
    corpus: str = "wikitext2"  # reference corpus: wikitext2 (test+valid, offline) or a text file, one sentence a line
    similarity_contexts: int = 5  # contextual WS-353 / SimLex word vectors: sentences per word
    single_category: bool = False  # SC-WEAT: d and p of each target word against A and B (no X vs Y)

    def __post_init__(self) -> None:
        check_range("metric.max_oov_share", self.max_oov_share, 0, 1)
        check_range("metric.max_contexts", self.max_contexts, 1)
        check_choice("metric.fallback", self.fallback, ("word", "templates", "drop"))
        check_choice("metric.reference_level", self.reference_level, ("token", "sentence"))
        check_range("metric.reference_sentences", self.reference_sentences, 1)
        check_range("metric.similarity_contexts", self.similarity_contexts, 1)
        check_corpus("metric.corpus", self.corpus)


CONTEXTUAL_ONLY = ("layer", "max_contexts", "fallback", "reference_level", "reference_sentences", "similarity_contexts")


def ignored_options(job: Job) -> dict[str, str]:
    """The options this job's model kind and whitening leave unused (the app refuses them when set)."""
    zca, static = job.whitening.name == "zca", job.model.kind == "static"
    ignored = {"stats.unit": "it sets what SEAT's CI resamples (sentences or words); WEAT's members are words"}
    if job.metric.single_category:
        ignored["whitening.name"] = (
            "metric.single_category=true scores raw vectors (SC-WEAT has no whitened variant here)"
        )
        ignored |= {
            f"stats.{f}": "SC-WEAT reports d and its permutation p, no bootstrap CI"
            for f in ("n_bootstrap", "confidence")
        }
    if not zca:
        ignored["stats.alpha"] = "it is the level of the raw vs whitened change class, which needs whitening=zca"
        ignored |= {f"whitening.{f}": "whitening=none fits no ZCA" for f in ("eps", "reference", "max_samples")}
        ignored |= {f"metric.{f}": "it is computed with whitening=zca only" for f in ("similarity", "anisotropy")}
    if static:
        ignored |= {
            f"metric.{f}": "contextual word vectors only (a language model, not static vectors)"
            for f in CONTEXTUAL_ONLY
        }
        if not (zca and job.whitening.reference == "corpus_word_types"):
            ignored["metric.corpus"] = (
                "static vectors read the corpus only for the ZCA reference "
                "(whitening=zca whitening.reference=corpus_word_types)"
            )
    else:
        ignored["whitening.reference"] = "static vectors only; a contextual ZCA fits on corpus states"
        if not zca:
            ignored |= {
                f"metric.{f}": "the contextual ZCA fit only (whitening=zca)"
                for f in ("reference_level", "reference_sentences")
            }
        if not (zca and job.metric.similarity):
            ignored["metric.similarity_contexts"] = "the similarity benchmarks only (whitening=zca, metric.similarity)"
    return ignored


def _corpus_sentences(corpus: str) -> list[str]:
    """Reference-corpus sentences: WikiText-2 (test + valid) or the non-empty lines of a text file."""
    if corpus == "wikitext2":
        return data.wikitext2_sentences("test") + data.wikitext2_sentences("valid")
    return data.load_text_corpus(Path(corpus).expanduser())  # metric.corpus: existence checked with the config


class SuiteVectors(NamedTuple):
    """:func:`suite_vectors`' answer: the ``vectors_fn`` to look the suite's words up with, what it reads
    from (the static embeddings or the language model), the corpus sentences (contextual models only) and
    the model's provenance."""

    vectors: StaticEmbeddings | ContextualWordVectors
    loaded: Any
    sentences: list[str] | None
    provenance: dict


def suite_vectors(job: Job, suite, cfg, task: str) -> SuiteVectors:
    """Word vectors of a WEAT suite's words for a job's model: static vectors (GloVe, word2vec) as stored,
    or a language model's contextual word vectors (Bommasani et al. 2020) from ``cfg.corpus`` at
    ``cfg.layer`` with ``cfg.max_contexts`` sentences per word and ``cfg.fallback``, extracted through the
    on-disk cache. The word rule is checked with the model's own spelling key (an uncased tokenizer reads
    Rose as rose). ``task`` names the progress lines. Used by ``metric=weat`` and ``metric=wefe``."""
    if job.model.kind == "static":
        embeddings = job.static_embeddings()  # with its intervention (hard_debias, an eraser)
        check_suite_words(suite.tests, embeddings.normalise)  # spellings the lookup merges are one word
        return SuiteVectors(embeddings, embeddings, None, model_loading.model_provenance(job.model, embeddings))
    model = job.language_model()
    sentences = _corpus_sentences(cfg.corpus)
    vectors = ContextualWordVectors(
        model,
        ContextIndex.build(sentences),
        layer=cfg.layer,
        max_contexts=cfg.max_contexts,
        seed=job.seed,
        fallback=cfg.fallback,
        batch_size=job.model.batch_size,
    )
    check_suite_words(suite.tests, vectors.normalise)
    with stage(task, "word vectors extracted") as extracted:
        extracted.count = prefetch_word_vectors(vectors, suite_words(suite), cache_dir=job.cache_dir, quiet=job.quiet)
    return SuiteVectors(vectors, model, sentences, model_loading.model_provenance(job.model, model))


def _contextual_similarity(model, vectors, zca, key, cfg, job: Job) -> list[dict]:
    """WS-353 and SimLex-999 with contextual word vectors; STS-B with mean-pooled sentence vectors."""
    rows, stats_cfg, batch_size = [], job.stats, job.model.batch_size
    words_fn = ContextualWordVectors(
        model,
        vectors.index,
        layer=cfg.layer,
        max_contexts=cfg.similarity_contexts,
        seed=vectors.seed,
        fallback="word",
        batch_size=batch_size,
    )
    benchmarks = (("WS-353", data.load_wordsim353()), ("SimLex-999", data.load_simlex999()))
    with stage("weat", "similarity word vectors extracted") as extracted:
        words = [w for _, pairs in benchmarks for w in (*pairs.word1, *pairs.word2)]
        extracted.count = prefetch_word_vectors(words_fn, words, cache_dir=job.cache_dir, quiet=job.quiet)
    for (name, pairs), k in zip(benchmarks, jax.random.split(key, 2)):
        u, v = words_fn(list(pairs.word1), name).vectors, words_fn(list(pairs.word2), name).vectors
        rows.append(similarity_row(name, k, (u, v), (apply_zca(zca, u), apply_zca(zca, v)), pairs.score, 0, stats_cfg))
    stsb = data.load_stsb("dev")
    with stage("weat", "STS-B sentence vectors extracted", 2 * len(stsb)):
        u, v = (
            cached_sentence_vectors(
                model,
                list(stsb[c]),
                cache_dir=job.cache_dir,
                layer=cfg.layer,
                batch_size=job.model.batch_size,
                progress=not job.quiet,
            )
            for c in ("sentence1", "sentence2")
        )
    rows.append(
        similarity_row(
            "STS-B",
            jax.random.fold_in(key, 2),
            (u, v),
            (apply_zca(zca, u), apply_zca(zca, v)),
            stsb.score,
            0,
            stats_cfg,
        )
    )
    return rows


def run(job: Job) -> JobResult:
    cfg, whitening = job.metric, job.whitening
    suite = datasets.weat_suite(job.dataset)
    check_suite_words(suite.tests)
    key_weat, key_aniso, key_sim = jax.random.split(jax.random.key(job.seed), 3)
    found = suite_vectors(job, suite, cfg, "weat")
    vectors, provenance = found.vectors, dict(found.provenance)
    if cfg.single_category:
        return _single_category(job, vectors, suite, key_weat, provenance)
    zca = reference = None
    if whitening.name == "zca":
        reference = _whitening_reference(job, found)
        with stage("weat", f"whitening fitted on {len(reference.vectors):,} vectors"):
            zca = fit_zca(reference.vectors, eps=whitening.eps)
    with stage("weat", f"{job.dataset.name} tests scored", len(suite.tests)):
        table = run_weat_experiment(
            vectors,
            suite,
            key=key_weat,
            whitening=zca,
            whitening_description=reference.description if zca is not None else "",
            options=job.stats.options(),
            alpha=job.stats.alpha,
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
    aggregates = [table]
    if zca is not None:
        aggregates += _whitening_outputs(job, found, table, reference, zca, key_aniso, key_sim)
    provenance["dataset_version"] = datasets.dataset_version(job.dataset, suite)
    provenance["whitening_reference"] = reference.description if zca is not None else None
    return JobResult(items=table, aggregates=pd.concat(aggregates, ignore_index=True), provenance=provenance)


def _whitening_reference(job: Job, found: Any) -> Any:
    """The vectors ZCA whitening is fitted on: a static model's reference words (``whitening.reference``), or a
    contextual model's vectors of at most ``metric.reference_sentences`` corpus sentences (cached)."""
    cfg, whitening = job.metric, job.whitening
    if job.model.kind == "static":
        word_types = (
            corpus_word_types(" ".join(_corpus_sentences(cfg.corpus)).split())
            if whitening.reference == "corpus_word_types"
            else None
        )
        return reference_sample(
            found.loaded,
            word_types=word_types,
            corpus_name="WikiText-2 (test+valid)" if cfg.corpus == "wikitext2" else cfg.corpus,
            max_items=whitening.max_samples,
            seed=job.seed,
        )
    sentences = found.sentences
    if len(sentences) > cfg.reference_sentences:
        rng = np.random.default_rng(job.seed)
        sentences = [sentences[i] for i in sorted(rng.choice(len(sentences), cfg.reference_sentences, replace=False))]
    with stage("weat", "reference vectors extracted") as extracted:
        reference = cached_reference(
            found.loaded,
            sentences,
            cache_dir=job.cache_dir,
            level=cfg.reference_level,
            layer=cfg.layer,
            max_items=whitening.max_samples,
            seed=job.seed,
            batch_size=job.model.batch_size,
            progress=not job.quiet,
        )
        extracted.count = len(reference.vectors)
    return reference


def _whitening_outputs(job, found, table, reference, zca, key_aniso, key_sim) -> list[pd.DataFrame]:
    """With ZCA whitening: the fitted whitening saved (``zca.npz``), its figures, and the rows of the anisotropy
    and similarity checks asked for (``metric.anisotropy``, ``metric.similarity``)."""
    cfg, rows = job.metric, []
    save_zca(
        zca,
        job.output_dir / "zca.npz",
        metadata={"model": job.model.name, "reference": reference.description, "eps": job.whitening.eps},
    )  # reload with jaxassoc.embeddings.load_zca
    if cfg.anisotropy:
        rows.append(_anisotropy_row(job, run_anisotropy(key_aniso, reference.vectors, zca)))
    if cfg.similarity and job.model.kind == "static":
        for name, pairs in (("WS-353", data.load_wordsim353()), ("SimLex-999", data.load_simlex999())):
            r = run_similarity_benchmark(
                found.loaded,
                pairs,
                zca,
                key=key_sim,
                name=name,
                n_resamples=job.stats.n_bootstrap,
                confidence=job.stats.confidence,
            )
            rows.append(pd.DataFrame([{"test": "similarity", **r}]))
        rows.append(pd.DataFrame([static_stsb(found.loaded, zca, jax.random.fold_in(key_sim, 2), job.stats)]))
    elif cfg.similarity:
        rows.append(pd.DataFrame(_contextual_similarity(found.loaded, found.vectors, zca, key_sim, cfg, job)))
    if cfg.anisotropy:
        plot_cosine_heatmaps(key_aniso, reference.vectors, zca, job.output_dir / "cosine_matrices.png")
    plot_effect_size_heatmap({job.model.name: table}, job.output_dir / "weat_heatmap.png", alpha=job.stats.alpha)
    plot_raw_vs_whitened({job.model.name: table}, job.output_dir / "weat_raw_vs_whitened.png")
    return rows


def _anisotropy_row(job: Job, a: dict) -> pd.DataFrame:
    """The anisotropy row (mean ± SD pairwise cosine, raw and whitened); the explained-variance spectrum is
    written beside it (``explained_variance``)."""
    spectrum = pd.DataFrame(
        {
            "component": np.arange(1, len(a["explained_variance_raw"]) + 1),
            "explained_variance_raw": a["explained_variance_raw"],
            "explained_variance_whitened": a["explained_variance_whitened"],
        }
    )
    store.write_table(job.output_dir, "explained_variance", spectrum)
    return pd.DataFrame(
        [
            {
                "test": "anisotropy",
                "name": "mean ± SD pairwise cosine (2,000 reference vectors)",
                "cosine_mean_raw": a["mean_raw"],
                "cosine_sd_raw": a["sd_raw"],
                "cosine_mean_whitened": a["mean_whitened"],
                "cosine_sd_whitened": a["sd_whitened"],
            }
        ]
    )


def _single_category(job: Job, vectors, suite, key, provenance: dict) -> JobResult:
    """``metric.single_category=true``: SC-WEAT of every target word (one row per word)."""
    with stage("weat", f"{job.dataset.name} SC-WEAT words scored") as scored:
        table = run_sc_weat_experiment(
            vectors, suite, key=key, options=job.stats.options(), max_oov_share=job.metric.max_oov_share
        )
        scored.count = len(table)
    provenance["dataset_version"] = datasets.dataset_version(job.dataset, suite)
    return JobResult(items=table, aggregates=table, provenance=provenance)


def views(aggregates: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The tests (name, set sizes, lost words, how p was counted, d, CI and p raw and whitened, change
    class; undefined reasons when a test has one) with a note on the p and CI, then the anisotropy and the
    similarity rows, each with its own columns."""
    if "word" in aggregates:  # metric.single_category=true: one row per target word
        rows = aggregates.assign(permutations=tables.permutations(aggregates))
        return [
            (
                "SC-WEAT: each target word against A and B",
                tables.with_notes(
                    tables.block(
                        rows,
                        ["test", "name", "set", "word", "associated_with", "d", "p", "p_min", "permutations", "n_a"]
                        + ["n_b", "lost_words", "caveat", "undefined_reason"],
                    ),
                    tables.test_note(rows).replace("permutation test", "permutation test of A ∪ B")
                    + "; associated_with: the attribute set the word is closer to (the sign of d)",
                ),
            )
        ]
    kind = aggregates["test"].where(aggregates["test"].isin(["anisotropy", "similarity"]), "tests")
    tests = aggregates[kind == "tests"]
    tests = tests.assign(permutations=tables.permutations(tests, "_raw"))
    return [
        (
            "tests",
            tables.with_notes(
                tables.block(
                    tests,
                    [
                        *tables.TEST_DESIGN,
                        "permutations",
                        "d_raw",
                        "ci_low_raw",
                        "ci_high_raw",
                        "p_raw",
                        "d_whitened",
                        "ci_low_whitened",
                        "ci_high_whitened",
                        "p_whitened",
                        "p_min",
                        "change",
                        "caveat",
                        "undefined_reason_raw",
                        "undefined_reason_whitened",
                    ],
                ),
                tables.test_note(tests, resampled="of the targets within X and within Y"),
            ),
        ),
        (
            "anisotropy: mean and SD of pairwise cosines",
            tables.block(
                aggregates[kind == "anisotropy"],
                ["cosine_mean_raw", "cosine_sd_raw", "cosine_mean_whitened", "cosine_sd_whitened"],
            ),
        ),
        (
            "similarity benchmarks (Spearman rho)",
            tables.with_notes(
                tables.block(
                    aggregates[kind == "similarity"],
                    ["benchmark", "n_pairs", "rho_raw", "rho_whitened", "difference", "ci_low", "ci_high", "p_value"],
                ),
                "difference = rho_whitened − rho_raw; its CI and two-sided p: paired percentile bootstrap over the "
                "n_pairs word pairs (docs/methods.md §5)",
            ),
        ),
    ]


def plot_effect_size_heatmap(results: Mapping[str, pd.DataFrame], path: str | Path, *, alpha=0.05):
    """Figure 3: one row per model, one column per test; each cell's upper-left triangle is d raw and
    its lower-right triangle d whitened, on a symmetric colour scale that covers the data (±max |d|), each
    value in black or white by its triangle's luminance, with its marks (``*``, ``**``, ``***``) and in bold
    when p < ``alpha``. Written by :func:`jaxassoc.app.figures.save` (PNG, PDF, SVG); returns the PNG."""
    from jaxassoc.app import figures

    models = list(results)
    tests = list(next(iter(results.values()))["test"])
    limit = figures.symmetric_limit(*(frame[f"d_{kind}"] for frame in results.values() for kind in ("raw", "whitened")))
    cmap, norm = plt.get_cmap("RdBu_r"), matplotlib.colors.Normalize(-limit, limit)
    fig, ax = plt.subplots(figsize=(1.1 * len(tests) + 2, 0.9 * len(models) + 1.5))
    for i, model in enumerate(models):
        frame = results[model].set_index("test")
        for j, test in enumerate(tests):
            for kind, corners, offset in (
                ("raw", [(j, i), (j + 1, i), (j, i + 1)], (0.3, 0.3)),
                ("whitened", [(j + 1, i), (j + 1, i + 1), (j, i + 1)], (0.7, 0.72)),
            ):
                d, p = float(frame.loc[test, f"d_{kind}"]), float(frame.loc[test, f"p_{kind}"])
                face = cmap(norm(d)) if np.isfinite(d) else "lightgrey"
                ax.add_patch(Polygon(corners, facecolor=face, edgecolor="white"))
                mark = tables.stars(p) if np.isfinite(p) else ""
                ax.text(j + offset[0], i + offset[1], f"{d:.2f}{mark}" if np.isfinite(d) else "–",
                        ha="center", va="center", fontsize=7, color=figures.text_colour(face),
                        fontweight="bold" if p < alpha else "normal")  # fmt: skip
    ax.set_xlim(0, len(tests))
    ax.set_ylim(len(models), 0)
    ax.set_xticks(np.arange(len(tests)) + 0.5, tests)
    ax.set_yticks(np.arange(len(models)) + 0.5, models)
    fig.colorbar(
        matplotlib.cm.ScalarMappable(norm, cmap), ax=ax, label=f"effect size d (scale ±{limit:.2f}: the largest |d|)"
    )
    ax.set_title(
        "WEAT d: raw (upper left) vs ZCA-whitened (lower right)\n"
        f"* p < .05, ** p < .01, *** p < .001; bold: p < {alpha:g}",
        fontsize=9,
    )
    return figures.save(fig, path)[0]


def plot_raw_vs_whitened(results: Mapping[str, pd.DataFrame], path: str | Path):
    """Figure 4: d whitened against d raw for every (model, test), coloured by change class, with both
    CIs as error bars (where the rows have them); the axes are symmetric and cover the data and CIs.
    Written by :func:`jaxassoc.app.figures.save` (PNG, PDF, SVG); returns the PNG."""
    from jaxassoc.app import figures

    colours = dict(zip(CHANGE_CLASSES, ("tab:pink", "tab:red", "tab:blue", "tab:gray", "white")))
    frames = list(results.values())
    bounds = [f[c] for f in frames for c in ("d_raw", "d_whitened", *(c for c in f if c.startswith("ci_")))]
    reach = 1.08 * figures.symmetric_limit(*bounds)
    fig, ax = plt.subplots(figsize=(5.5, 5))
    markers = "osv^D<>p"
    for marker, (model, frame) in zip(markers, results.items()):
        for kind, axis in (("raw", "x"), ("whitened", "y")):
            lo, hi = frame.get(f"ci_low_{kind}"), frame.get(f"ci_high_{kind}")
            if lo is None or hi is None:
                continue
            centre = frame[f"d_{kind}"].to_numpy(float)
            spread = np.nan_to_num(
                np.vstack([centre - np.clip(lo, -reach, reach), np.clip(hi, -reach, reach) - centre])
            )
            ax.errorbar(frame.d_raw, frame.d_whitened, **{f"{axis}err": spread.clip(min=0)}, fmt="none",
                        ecolor="grey", elinewidth=0.7, capsize=2, zorder=1)  # fmt: skip
        ax.scatter(frame.d_raw, frame.d_whitened, c=[colours[c] for c in frame.change],
                   marker=marker, edgecolors="black", linewidths=0.4, zorder=2)  # fmt: skip
        ax.scatter([], [], marker=marker, facecolors="none", edgecolors="black", label=model)  # the model's marker
        for _, row in frame.iterrows():
            ax.annotate(row.test, (row.d_raw, row.d_whitened), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")  # fmt: skip
    lim = (-reach, reach)
    ax.plot(lim, lim, color="black", linewidth=0.8, ls="--", label="y = x: whitening leaves d unchanged")
    ax.set(xlim=lim, ylim=lim, xlabel="d raw (error bars: its CI)", ylabel="d ZCA-whitened (error bars: its CI)")
    for change, colour in colours.items():
        ax.scatter([], [], c=colour, label=change, edgecolors="black", linewidths=0.4)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    return figures.save(fig, path)[0]


def plot_cosine_heatmaps(
    key: jax.Array, reference: np.ndarray, whitening: ZcaStats, path: str | Path, *, n_samples=2000
):
    """Figure 1: pairwise cosine matrices of ``n_samples`` random reference vectors, raw and whitened.

    The vectors are sorted by their mean cosine with the others in the raw space (high to low; the same
    order in both panels), and each panel shows the mean cosine over blocks of vectors (at most 200 x 200
    blocks, the diagonal left out): a 2,000 x 2,000 matrix drawn into a few hundred pixels would show an
    arbitrary one of the cosines each pixel covers (aliasing). The titles give the mean and SD over every
    pair. Written by :func:`jaxassoc.app.figures.save` (PNG, PDF, SVG); returns the PNG's path."""
    from jaxassoc.app import figures

    max_blocks = 200
    sample = np.asarray(sample_rows(key, reference, n_samples))
    n = len(sample)
    off = ~np.eye(n, dtype=bool)
    panels = [("raw", np.asarray(cosine_matrix(sample), dtype=np.float64))]
    panels.append(("ZCA-whitened", np.asarray(cosine_matrix(apply_zca(whitening, sample)), dtype=np.float64)))
    order = np.argsort(-np.where(off, panels[0][1], 0.0).sum(1), kind="stable")
    blocks = min(n, max_blocks)
    starts = (np.arange(blocks) * n) // blocks  # near-equal blocks of consecutive (sorted) vectors
    size = n / blocks
    counts = np.add.reduceat(np.add.reduceat(off.astype(np.float64), starts, axis=0), starts, axis=1)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), layout="constrained")
    for ax, (title, cos) in zip(axes, panels):
        pairs = cos[off]
        sums = np.add.reduceat(np.add.reduceat(np.where(off, cos, 0.0)[np.ix_(order, order)], starts, 0), starts, 1)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, sums / counts, np.nan)
        image = ax.imshow(means, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest", extent=(0, n, n, 0))
        ax.set_title(f"{title}: mean {pairs.mean():.3f}, SD {pairs.std():.3f}\nover all {n * (n - 1) // 2:,} pairs")
        ax.set_xlabel("reference vectors (sorted)")
        ax.set_ylabel("reference vectors (sorted)")
    block = f"{size:g}" if float(size).is_integer() else f"≈{size:.1f}"
    fig.supxlabel(f"{n:,} reference vectors, sorted by their mean raw cosine with the others, high to low", fontsize=10)
    fig.colorbar(
        image, ax=axes, shrink=0.9, label=f"mean cosine per block of {block} × {block} vectors (diagonal left out)"
    )
    return figures.save(fig, path)[0]


def _save(fig, path: str | Path) -> Path:
    """Write the figure atomically (format from the suffix, PNG by default) and close it."""
    path = Path(path)
    try:
        atomic_write(path, lambda p: fig.savefig(p, format=path.suffix[1:] or "png", dpi=150, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return path


SPEC = MetricSpec(
    name="weat",
    run=run,
    config=WeatMetricConfig,
    model_kinds=("static", *LANGUAGE_MODELS),
    title="WEAT",
    description="WEAT / ZCA-whitened WEAT on static or contextual vectors",
    uses=frozenset({"stats", "whitening"}),
    ignores=ignored_options,
    views=views,
    effects=D_RAW_AND_WHITENED,
    plots=(*EFFECT_PLOTS, RAW_VS_WHITENED),
)
