"""Readouts: what a loaded model says about words, prompts and sentences, as plain functions a user can call
from Python (no Hydra, no app): WEAT / SC-WEAT / similarity tables on vector sources (:mod:`.weat`), CEAT
context pools (:mod:`.ceat`), sentence log-likelihoods for UnStereoEval (:mod:`.unstereo`), ILPS / ILPS* /
SeT scores (:mod:`.stereotypes`, :mod:`.stereotypes_mlm`), RPAM prompts, forward passes and validation tasks
(:mod:`.rpam_prompts`, :mod:`.rpam`, :mod:`.rpam_downstream`) and RPAM's inputs recomputed from any output head,
differentiable (:mod:`.rpam_head`, which ``examples/`` use), through the on-disk array cache
(:mod:`jaxassoc.array_cache`).

A layer above :mod:`jaxassoc.models` and :mod:`jaxassoc.metrics` (like :mod:`jaxassoc.embeddings`): it may
import both; metrics never import models, models never metrics, and nothing here imports the app.
"""
