"""The built-in metrics: each task module's config dataclass and run function, registered by name, with the
shared options each one reads (``uses``), those its job's setting leaves unused (``ignores``) and its compact
tables (``views``): the app
refuses any other option that is set (:mod:`jaxassoc.app.validation`; ``docs/statistics_options.md``).

Task modules (:mod:`jaxassoc.app.tasks`) are imported (and so JAX models) only when ``register_all`` runs, which
:func:`jaxassoc.app.registry.load_metrics` does once per process.
"""

from __future__ import annotations

from jaxassoc.app.registry import register_metric

LANGUAGE_MODELS = ("causal", "masked", "encoder")


def register_all() -> None:
    """Register every built-in metric."""
    from jaxassoc.app.tasks import (
        ceat,
        crows_pairs,
        intersectional,
        mediation,
        rpam,
        seat,
        stereoset,
        stereotypes,
        unstereo,
        weat,
        wefe,
    )

    register_metric(
        "weat",
        run=weat.run,
        config=weat.WeatMetricConfig,
        model_kinds=("static", *LANGUAGE_MODELS),
        description="WEAT / ZCA-whitened WEAT on static or contextual vectors",
        uses={"stats", "whitening"},
        ignores=weat.ignored_options,
        views=weat.views,
    )
    register_metric(
        "wefe",
        run=wefe.run,
        config=wefe.WefeMetricConfig,
        model_kinds=("static", *LANGUAGE_MODELS),
        description="WEFE's RND, RNSB, MAC, ECT and RIPA on a WEAT suite, static or contextual vectors",
        uses={"stats.n_bootstrap", "stats.confidence"},
        ignores=wefe.ignored_options,
        views=wefe.views,
    )
    register_metric(
        "seat",
        run=seat.run,
        config=seat.SeatMetricConfig,
        model_kinds=LANGUAGE_MODELS,
        description="SEAT: WEAT on sentence vectors of a WEAT suite's words in bleached templates",
        uses={"stats"},
        ignores=seat.ignored_options,
        views=seat.views,
    )
    register_metric(
        "rpam",
        run=rpam.run,
        config=rpam.RpamMetricConfig,
        model_kinds=("causal", "seq2seq"),
        description="RPAM Test / Valence / similarity on a causal LM or an encoder-decoder (T5)",
        uses={*(f"stats.{f}" for f in rpam.STATS_USED), "stats.correction", "dataset.sample", "template"},
        ignores=rpam.ignored_options,
        views=rpam.views,
    )
    for name in stereotypes.SCORES:
        register_metric(
            name,
            run=stereotypes.run,
            config=stereotypes.StereotypeMetricConfig,
            model_kinds=("causal", "masked"),
            description=f"{name} stereotype scores aligned with human ratings (Cao et al. 2022)",
            uses={"stats.confidence", "stats.correction"},
            ignores=stereotypes.ignored_options,
            views=stereotypes.views,
        )
    register_metric(
        "unstereo",
        run=unstereo.run,
        config=unstereo.UnstereoMetricConfig,
        model_kinds=("causal",),
        description="UnStereoEval US score and preference disparity on a causal LM",
        uses={"dataset.sample"},
        views=unstereo.views,
    )
    register_metric(
        "ceat",
        run=ceat.run,
        config=ceat.CeatMetricConfig,
        model_kinds=LANGUAGE_MODELS,
        description="CEAT (random-effects WEAT over contextual embeddings) on a WEAT suite",
        uses={"stats.alternative", "stats.correction"},
        ignores=ceat.ignored_options,
        views=ceat.views,
    )
    register_metric(
        "intersectional",
        run=intersectional.run,
        config=intersectional.IntersectionalMetricConfig,
        model_kinds=("causal", "masked"),
        description="paired ABC groups: identity order, dominant domains, emergent associations",
        uses=frozenset(),
        ignores=intersectional.ignored_options,
        views=intersectional.views,
    )
    register_metric(
        "crows_pairs",
        run=crows_pairs.run,
        config=crows_pairs.CrowsPairsMetricConfig,
        model_kinds=("causal", "masked"),
        description="CrowS-Pairs metric score overall and per bias type (Nangia et al. 2020)",
        uses={"stats.alternative", "stats.confidence", "stats.correction", "dataset.sample"},
        ignores=crows_pairs.ignored_options,
        views=crows_pairs.views,
        dataset="crows_pairs",
    )
    register_metric(
        "mediation",
        run=mediation.run,
        config=mediation.MediationMetricConfig,
        model_kinds=("causal",),
        description="causal mediation analysis of gender bias: effects of every head and top neurons (Vig et al. 2020)",
        uses={"dataset.sample", "stats.n_bootstrap", "stats.confidence"},
        views=mediation.views,
        dataset="vig_professions",
    )
    register_metric(
        "stereoset",
        run=stereoset.run,
        config=stereoset.StereoSetMetricConfig,
        model_kinds=("causal", "masked"),
        description="StereoSet LM, SS and ICAT scores per split and domain (Nadeem et al. 2021)",
        uses={"dataset.sample"},
        ignores=stereoset.ignored_options,
        views=stereoset.views,
        dataset="stereoset",
    )
