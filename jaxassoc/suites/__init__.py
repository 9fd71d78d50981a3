"""Suites: a metric's analysis, from a model's readouts or vectors to the tables a paper reports, as plain
functions a user can call from Python (no Hydra, no app): WEAT / SC-WEAT tests, anisotropy and similarity
benchmarks on vector sources (:mod:`.weat`), SEAT on sentence vectors (:mod:`.seat`), WEFE's queries
(:mod:`.wefe`), CEAT's random-effects tests on context pools (:mod:`.ceat`), RPAM's validation tasks
(:mod:`.rpam`), ILPS / ILPS* / SeT scores from head inputs with SeT's solvers and their alignment with human
ratings (:mod:`.stereotypes`, :mod:`.stereotypes_mlm`, :mod:`.stereotypes_shared`), the paired groups'
analyses (:mod:`.intersectional`), UnStereoEval's, CrowS-Pairs' and StereoSet's scores from sentence scores
(:mod:`.unstereo`, :mod:`.crows_pairs`, :mod:`.stereoset`) and causal mediation's effects (:mod:`.mediation`):
tables with their tests, intervals and small-sample caveats.

The layer between :mod:`jaxassoc.readouts` (a model's prompts, forward passes and scores) and the app: it may
import the readouts, :mod:`jaxassoc.array_cache` and the layers below them (metrics, models, embeddings, stats,
data, resources); the readouts never import it, and nothing here imports the app.
"""
