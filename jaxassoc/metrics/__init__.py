"""Pure, jit-compiled metric kernels on arrays (never imports ``jaxassoc.models``).

Every kernel takes arrays (vectors, logits, log-probabilities, head weights) and returns an array or a
NamedTuple of arrays, so results pass through ``jax.jit``, ``jax.vmap`` and ``jax.grad``: a metric is a
differentiable function of the model's outputs, and through the caller's forward pass of its weights.
Host-side ``check_*`` gates and the full-test entry points raise :class:`jaxassoc.errors.InputError` on
bad inputs before any kernel runs. The formulas, defaults and parity switches are pinned in docs/methods.md.

Field guide (module: what is there; paper):

- :mod:`~jaxassoc.metrics.weat` — WEAT and SC-WEAT (Caliskan, Bryson & Narayanan 2017; ZCA-WEAT paper
  Eq. 1-4): ``associations`` s(w, A, B), ``effect_size`` d (``clustered_effect_size``: d over items
  grouped in clusters, SEAT's words), ``weat_statistics``, ``weat_effect_size``
  (a scalar to differentiate), ``sc_weat_effect_size``, ``sc_weat`` (with its permutation p-value over
  A ∪ B, ``ScWeatResult``); ``weat.weat(key, x, y, a, b)`` adds the
  permutation p-value and a bootstrap CI (``WeatResult``); ``association_test`` (``AssociationTest``)
  is that p and CI on any per-target scores s (WEAT's, RPAM's or a user metric's), NaN when s is constant
  (``is_constant``, ``association_scale``); ``check_distinct_words`` is the word rule of every metric
  with word sets (no word twice in a test); ``cosine_similarities`` and ``unit_rows`` (rows at unit length,
  for any finite magnitude) are the cosine every metric uses.
- :mod:`~jaxassoc.metrics.rpam` — RPAM (Hodel, West & Caliskan 2026, §4, App. E):
  ``relative_probabilities`` p(v, t), ``association_scores``, ``rpam_effect_size`` (Eq. 1 from the logits:
  differentiable in the output head), ``rpam_test`` (``RpamTestResult``), ``rpam_valence``.
- :mod:`~jaxassoc.metrics.set_exact` — SeT, the minimal output-layer change (Cao et al. 2022, §3.1),
  solved exactly by column squishing: ``set_exact``, ``set_exact_kernel``, ``set_from_logits``,
  ``project_logits``, ``projection_delta``, ``set_update`` (``SetResult``, ``LogitProjection``).
- :mod:`~jaxassoc.metrics.set_optax` — the same objective by augmented Lagrangian + optax L-BFGS, with one
  ΔA shared by several contexts: ``set_optax``, ``set_optax_kernel``, ``set_optax_sharded``,
  ``set_optax_update`` (the shared ΔA itself), ``optax_converged`` (``SharedSetResult``, ``SolverSettings``).
- :mod:`~jaxassoc.metrics.set_score` — SeT distances to group-trait scores: ``transform_distance``,
  ``min_over_subwords``, ``median_over_synonyms``, ``group_minus_prior``, ``set_word_scores``.
- :mod:`~jaxassoc.metrics.ilps` — ILPS and ILPS* (Kurita et al. 2019; Cao et al. 2022): ``base_ilps``,
  ``ilps_star``, ``first_subword_logprob``, ``chain_rule_logprob``, ``word_initial_mask``;
  ``ilps.ilps`` is the difference of log-probabilities.
- :mod:`~jaxassoc.metrics.ceat` — CEAT (Guo & Caliskan 2021) with DerSimonian-Laird random effects:
  ``ceat.ceat``, ``ceat_single_group``, ``random_effects``, ``weat_draws``, ``draw_indices``,
  ``pad_contexts`` (``ContextualSet``, ``CeatResult``, ``RandomEffects``).
- :mod:`~jaxassoc.metrics.stereotype_alignment` — Kendall τ-b and P@3 against human stereotype ratings,
  emergent intersectional scores (Cao et al. 2022, §3.2, §5): ``alignment``, ``pair_scores``,
  ``precision_at_3``, ``emergent_scores``, ``human_group_indices``.
- :mod:`~jaxassoc.metrics.unstereo` — UnStereoEval (Belem et al. 2024): ``unstereo_eval``,
  ``unstereo_metrics``, ``fm_log_ratio``, ``is_neutral``, ``maxpmi_mask``, ``neutrality_curve``, ``aufc``.
- :mod:`~jaxassoc.metrics.wefe` — WEFE's family (Badilla et al. 2020): ``rnd`` (Garg et al. 2018), ``rnsb``
  (Sweeney & Najafian 2019; its L2 logistic regression in :mod:`~jaxassoc.metrics.logistic`), ``mac``
  (Manzini et al. 2019), ``ect`` (Dev & Phillips 2019), ``ripa`` (Ethayarajh et al. 2019), ``check_query``.
- :mod:`~jaxassoc.metrics.crows_pairs` — the CrowS-Pairs metric from sentence scores (Nangia et al. 2020,
  §3): ``pair_outcomes`` (the authors' rounding and ties), ``metric_score``, ``direction_score`` and the
  differentiable stand-in ``soft_metric_score``.
- :mod:`~jaxassoc.metrics.stereoset` — StereoSet's LM, SS and ICAT scores (Nadeem et al. 2021, §6.1):
  ``stereoset_scores`` (``StereoSetScores``), ``icat``.
- :mod:`~jaxassoc.metrics.mediation` — causal mediation effects from pronoun log-odds (Vig et al. 2020):
  ``relative_change`` (``y_intervened / y_null − 1``), ``mean_effect`` (TE, NIE, NDE).
- :mod:`~jaxassoc.metrics.anisotropy` — anisotropy of an embedding space (Ethayarajh 2019; ZCA-WEAT
  Experiment 1): ``anisotropy.anisotropy``, ``pairwise_cosine``, ``cosine_matrix``,
  ``explained_variance_ratio``, ``sample_rows``.
- :mod:`~jaxassoc.metrics.similarity` — cosine vs human similarity, raw vs whitened (ZCA-WEAT
  Experiment 2): ``cosine_spearman``, ``compare_whitening``, ``pair_cosines``.

Functions that share their module's name (``weat``, ``ceat``, ``ilps``, ``anisotropy``, ``set_exact``,
``set_optax``) are reached through the module, e.g. ``jaxassoc.metrics.weat.weat``: the package
attribute stays the module so that ``from jaxassoc.metrics import weat`` keeps meaning the module.
"""

from jaxassoc.metrics import (
    anisotropy,
    ceat,
    crows_pairs,
    ilps,
    logistic,
    mediation,
    rpam,
    set_exact,
    set_optax,
    set_score,
    similarity,
    stereoset,
    stereotype_alignment,
    unstereo,
    weat,
    wefe,
)
from jaxassoc.metrics.anisotropy import (
    Anisotropy,
    cosine_matrix,
    explained_variance_ratio,
    pairwise_cosine,
    sample_rows,
)
from jaxassoc.metrics.ceat import (
    CeatResult,
    ContextualSet,
    RandomEffects,
    ceat_single_group,
    check_contextual_set,
    draw_indices,
    pad_contexts,
    random_effects,
    single_group_draw,
    single_group_draws,
    weat_draw,
    weat_draws,
)
from jaxassoc.metrics.crows_pairs import direction_score, metric_score, pair_outcomes, soft_metric_score
from jaxassoc.metrics.ilps import (
    base_ilps,
    chain_rule_logprob,
    first_subword_logprob,
    ilps_star,
    word_initial_mask,
)
from jaxassoc.metrics.logistic import fit_logistic, logistic_objective, predict_positive
from jaxassoc.metrics.mediation import mean_effect, relative_change
from jaxassoc.metrics.rpam import (
    RpamTestResult,
    association_scores,
    relative_probabilities,
    rpam_effect_size,
    rpam_test,
    rpam_valence,
)
from jaxassoc.metrics.set_exact import (
    LogitProjection,
    SetResult,
    check_set_inputs,
    project_logits,
    projection_delta,
    set_exact_kernel,
    set_from_logits,
    set_update,
)
from jaxassoc.metrics.set_optax import (
    SharedSetResult,
    SolverSettings,
    optax_converged,
    set_optax_kernel,
    set_optax_sharded,
    set_optax_update,
)
from jaxassoc.metrics.set_score import (
    group_minus_prior,
    median_over_synonyms,
    min_over_subwords,
    set_word_scores,
    transform_distance,
)
from jaxassoc.metrics.similarity import SimilarityComparison, compare_whitening, cosine_spearman, pair_cosines
from jaxassoc.metrics.stereoset import StereoSetScores, icat, stereoset_scores
from jaxassoc.metrics.stereotype_alignment import (
    AlignmentResult,
    EmergentScores,
    alignment,
    emergent_scores,
    human_group_indices,
    pair_scores,
    precision_at_3,
)
from jaxassoc.metrics.unstereo import (
    UnstereoResult,
    aufc,
    fm_log_ratio,
    is_neutral,
    maxpmi_mask,
    neutrality_curve,
    unstereo_eval,
    unstereo_metrics,
)
from jaxassoc.metrics.weat import (
    AssociationTest,
    ClusteredEffectSize,
    ScWeatResult,
    WeatResult,
    WeatStatistics,
    association_scale,
    association_test,
    associations,
    check_distinct_words,
    check_word_set,
    clustered_effect_size,
    cosine_similarities,
    effect_size,
    is_constant,
    sc_weat,
    sc_weat_effect_size,
    unit_rows,
    weat_effect_size,
    weat_statistics,
)
from jaxassoc.metrics.wefe import (
    RipaResult,
    RndResult,
    RnsbResult,
    check_query,
    ect,
    holdout_mask,
    mac,
    ripa,
    rnd,
    rnsb,
)

__all__ = [
    # modules (their same-named entry points: weat.weat, ceat.ceat, ilps.ilps, anisotropy.anisotropy,
    # set_exact.set_exact, set_optax.set_optax)
    "anisotropy",
    "ceat",
    "crows_pairs",
    "ilps",
    "rpam",
    "set_exact",
    "set_optax",
    "set_score",
    "similarity",
    "stereoset",
    "stereotype_alignment",
    "unstereo",
    "weat",
    "wefe",
    "logistic",
    # CrowS-Pairs, StereoSet
    "direction_score",
    "metric_score",
    "pair_outcomes",
    "soft_metric_score",
    "StereoSetScores",
    "icat",
    "stereoset_scores",
    # result NamedTuples
    "RipaResult",
    "RndResult",
    "RnsbResult",
    "AlignmentResult",
    "AssociationTest",
    "Anisotropy",
    "CeatResult",
    "ContextualSet",
    "EmergentScores",
    "LogitProjection",
    "RandomEffects",
    "RpamTestResult",
    "ScWeatResult",
    "SetResult",
    "SharedSetResult",
    "SimilarityComparison",
    "SolverSettings",
    "UnstereoResult",
    "WeatResult",
    "WeatStatistics",
    # functions
    "check_query",
    "ect",
    "fit_logistic",
    "holdout_mask",
    "logistic_objective",
    "mac",
    "predict_positive",
    "ripa",
    "rnd",
    "rnsb",
    "alignment",
    "association_scale",
    "association_scores",
    "association_test",
    "associations",
    "aufc",
    "base_ilps",
    "ceat_single_group",
    "chain_rule_logprob",
    "check_contextual_set",
    "check_distinct_words",
    "check_set_inputs",
    "check_word_set",
    "compare_whitening",
    "cosine_matrix",
    "cosine_similarities",
    "cosine_spearman",
    "draw_indices",
    "effect_size",
    "clustered_effect_size",
    "ClusteredEffectSize",
    "emergent_scores",
    "explained_variance_ratio",
    "first_subword_logprob",
    "fm_log_ratio",
    "group_minus_prior",
    "human_group_indices",
    "ilps_star",
    "is_constant",
    "is_neutral",
    "maxpmi_mask",
    "median_over_synonyms",
    "min_over_subwords",
    "neutrality_curve",
    "optax_converged",
    "pad_contexts",
    "pair_cosines",
    "pair_scores",
    "pairwise_cosine",
    "precision_at_3",
    "project_logits",
    "projection_delta",
    "random_effects",
    "relative_probabilities",
    "rpam_effect_size",
    "rpam_test",
    "rpam_valence",
    "sample_rows",
    "sc_weat",
    "sc_weat_effect_size",
    "set_exact_kernel",
    "set_from_logits",
    "set_optax_kernel",
    "set_optax_sharded",
    "set_optax_update",
    "set_update",
    "set_word_scores",
    "single_group_draw",
    "single_group_draws",
    "transform_distance",
    "unstereo_eval",
    "unit_rows",
    "unstereo_metrics",
    "weat_draw",
    "weat_draws",
    "weat_effect_size",
    "weat_statistics",
    "word_initial_mask",
    "mean_effect",
    "mediation",
    "relative_change",
]
