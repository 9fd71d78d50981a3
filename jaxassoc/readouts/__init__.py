"""Readouts: what a loaded model says about words, prompts and sentences, as arrays, through plain functions a
user can call from Python (no Hydra, no app): contextual word, sentence and reference vectors (:mod:`.vectors`),
SEAT's sentences (:mod:`.seat`), CEAT context pools (:mod:`.ceat`), sentence log-likelihoods for UnStereoEval
(:mod:`.unstereo`), CrowS-Pairs and StereoSet sentence scores (:mod:`.crows_pairs`, :mod:`.stereoset`,
:mod:`.sentence_scores`), ABC prompts and their head inputs at each trait subword (:mod:`.stereotypes`,
:mod:`.stereotypes_mlm`, :mod:`.stereotypes_shared`), the pronoun log-odds of causal mediation's runs
(:mod:`.mediation`), RPAM prompts, forward passes and probabilities (:mod:`.rpam_prompts`, :mod:`.rpam`), an
instruct model's ratings (:mod:`.rpam_downstream`) and RPAM's inputs recomputed from any output head,
differentiable (:mod:`.rpam_head`, which ``examples/`` use). The costly passes can go through the on-disk
array cache (:mod:`jaxassoc.array_cache`).

What a metric makes of these arrays (tables, tests, intervals) is in :mod:`jaxassoc.suites`, a layer above.
This one is above :mod:`jaxassoc.models` and :mod:`jaxassoc.metrics` (like :mod:`jaxassoc.embeddings`): it may
import both; metrics never import models, models never metrics, and nothing here imports the suites or the app.
"""
